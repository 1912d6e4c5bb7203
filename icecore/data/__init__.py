"""Data and delete files themselves: how Iceberg schemas are written as Arrow/Parquet."""
