"""Data and delete files themselves, in Arrow: Iceberg schemas as Arrow/Parquet schemas,
columns read by field id, a file's live rows with its deletes applied, and the manifest metrics
of a written file from its footer. No engine: Spark tasks and the driver's threads use them
alike."""
