"""PySpark jobs that write and maintain Iceberg tables through `icecore`.

Every job is a script (`spark-submit spark_jobs/<job>.py ...`) with the command-line contract
of `spark_jobs.common.cli`, and a function callable from Python with a SparkSession.

Executors import `icecore` and `spark_jobs` (footer metrics, bucket hashing). Ship them
either as an installed package (`pip install` of this project into the executors' Python,
what local mode and the tests use) or as a zip on `--py-files`, built with
`python -m spark_jobs.common.packaging dist/icefloe.zip`. icecore's own dependencies
(pyarrow, fastavro, SQLAlchemy) and pandas/numpy must be installed in the executors' Python
either way: they contain compiled code and cannot travel in a zip.

Spark-side code depends on icecore, never the other way round.
"""
