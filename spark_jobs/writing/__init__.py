"""Writing Iceberg data and delete files from Spark tasks: the Spark side of icecore's writers.

Spark computes the partition columns (`layout`, `transforms`), shuffles and sorts the rows,
and runs icecore's task writers on their Arrow batches (`files`: Parquet data and delete
files, `icecore.data.parquet_writer`; `deletion_vectors`: Puffin DVs,
`icecore.data.dv_files`; `grouped_deletes`: delete files by partition group). The tasks
describe their files from the footers they still hold, so no data is read back.
"""
