"""Data and delete files themselves, in Arrow: Iceberg schemas as Arrow/Parquet schemas,
columns read by field id, a file's live rows with its deletes applied, Parquet and Puffin
files written and described from their footers, partition values and bucket hashes of whole
columns, and the work of a task of the rewrite actions. No engine: Spark tasks and the
driver's threads use them alike."""
