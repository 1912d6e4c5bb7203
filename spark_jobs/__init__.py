"""PySpark jobs that write and maintain Iceberg tables: the Spark execution of what `icecore`
plans.

    spark-submit --py-files dist/icefloe.zip spark_jobs/main.py <job> --table db.events ...

- one package or module per job, named after it, each with `run(spark, catalog, options)`:
  `ingest`, `convert_equality_deletes`, `rewrite_position_deletes`, `rewrite_data_files`,
  `rewrite_manifests`, `expire_snapshots`, `remove_orphan_files`; their options, results
  and command lines are declared once in `icecore.jobs`;
- what several jobs share: `reading` (table files read into Spark through FileIO, live rows
  with their deletes applied, deletion vectors' positions), `writing` (the partition columns
  and transforms Spark computes, and the tasks running icecore's file writers), `files`
  (listing, deletion and the trash in Spark tasks), `schema` (Iceberg <-> Spark types),
  `common` (the command line, the session, packaging, the Python workers' FileIO).

What a job decides from metadata alone is icecore's (`icecore.actions`: the planners, what
they plan from, the files of a run, how commits batch and retry after a conflict, which files
orphan removal must keep), and so is
what a task does without Spark (`icecore.data`: Parquet and Puffin writers that describe
their files, delete application in Arrow, bucket hashing); a job runs those plans in Spark
and commits them.

Executors import `icecore` and `spark_jobs` (the task code, footer metrics, bucket hashing).
Ship them either as an installed package (`pip install` of this project into the executors'
Python, what local mode and the tests use) or as a zip on `--py-files`, built with
`python -m spark_jobs.common.packaging dist/icefloe.zip`; a job run as a Spark Connect client
(`SPARK_REMOTE`, `spark_jobs.common.connect`) ships that zip to the server itself. icecore's
own dependencies (pyarrow, fastavro, pyroaring, SQLAlchemy) and pandas/numpy must be installed
in the executors' Python either way: they contain compiled code and cannot travel in a zip.

Spark-side code depends on icecore, never the other way round. Adding a job:
CONTRIBUTING.md.
"""
