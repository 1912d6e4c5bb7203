"""Writing Iceberg data and delete files with Spark's Parquet writer, and describing them.

Spark writes the files (field ids, INT64 micros timestamps, the table's partition layout),
or pyarrow on the executors for the types Spark's writer cannot produce (`arrow_files`);
executors then read each file's Parquet footer and turn it into the manifest metrics Iceberg
writers record, so no data is read back on the driver.
"""
