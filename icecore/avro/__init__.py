"""Avro for manifests and manifest lists: Iceberg types as Avro schemas (`schema`), the
container file read by field id and written (`container`), and a decoder compiled per schema
(`decoder`)."""
