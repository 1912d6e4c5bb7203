"""Writing Iceberg data and delete files from Spark tasks, and describing them.

The tasks write each file with pyarrow through the table's FileIO (`arrow_files`: field ids,
INT64 micros timestamps, the table's partition layout and location provider) and read its
Parquet footer as they close it, turning it into the manifest metrics Iceberg writers record,
so no data is read back on the driver.
"""
