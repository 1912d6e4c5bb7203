"""PySpark jobs that write and maintain Iceberg tables through `icecore`.

    spark-submit --py-files dist/icefloe.zip spark_jobs/main.py <job> --table db.events ...

- one package or module per job, named after it, each with `run(spark, catalog, options)`:
  `ingest`, `convert_equality_deletes`, `rewrite_position_deletes`, `rewrite_data_files`,
  `expire_snapshots`, `remove_orphan_files`; their options are declared once in `specs`;
- what several jobs share: `planning` (size bounds, bin packing), `committing` (batches with
  partial progress, re-planning, cleanup), `reading` (live files and rows, deletes applied),
  `writing` (data and delete files, partition layout, metrics), `files` (listing, deletion,
  other tables' files), `schema` (Iceberg <-> Spark types), `common` (the command line, the
  session, packaging).

Executors import `icecore` and `spark_jobs` (footer metrics, bucket hashing). Ship them
either as an installed package (`pip install` of this project into the executors' Python,
what local mode and the tests use) or as a zip on `--py-files`, built with
`python -m spark_jobs.common.packaging dist/icefloe.zip`; a job run as a Spark Connect client
(`SPARK_REMOTE`, `spark_jobs.common.connect`) ships that zip to the server itself. icecore's
own dependencies (pyarrow, fastavro, pyroaring, SQLAlchemy) and pandas/numpy must be installed
in the executors' Python either way: they contain compiled code and cannot travel in a zip.

Spark-side code depends on icecore, never the other way round. Adding a job:
CONTRIBUTING.md.
"""
