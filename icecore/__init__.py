"""icecore: the Apache Iceberg table spec (v1 read; v2 and v3 read and write) in plain Python.

No Spark and no Airflow here: the Spark jobs and the Airflow operators both build on it.

- `spec`: the spec's model: types, schemas, transforms, partition specs, sort orders,
  snapshots and refs, table metadata (and its builder), manifests and manifest lists,
  Puffin files and deletion vectors, commits as requirements + updates; its rules, each in
  one place: table properties and their defaults (`properties`), reserved field ids
  (`metadata_columns`), which data file a position delete targets (`delete_targets`);
- `avro`: the Avro container and codecs under manifests and manifest lists;
- `expressions`: row filters, their parser, literals, projection and pruning;
- `scan`: scan planning, with the spec's rules for which deletes apply to which file;
- `io`: file access on every storage (`FileIO`, on `pyarrow.fs`);
- `data`: data and delete files read and written in Arrow (schemas, columns by field id,
  deletes applied to a file's rows, footer metrics);
- `location_provider`: where new data, delete and metadata files go;
- `actions`: maintenance planners and commit batching, engine-neutral;
- `catalog`: catalogs (SQL, REST, static), the registry by type, and table locations;
- `commit`: snapshot-producing commits (append, overwrite, row delta, rewrite, delete);
- `updates`: metadata-only commits (schema, spec, sort order, properties, refs, expiry);
- `table`: the table facade; `health`: a table's health from its metadata; `errors`.
"""
