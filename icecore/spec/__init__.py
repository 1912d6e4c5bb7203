"""The Iceberg table spec as typed models: types and schemas, partition transforms and specs,
sort orders, single-value serialization, snapshots and refs, table metadata and the pure
transitions between versions of it, manifests and manifest lists."""
