"""Reading table files into Spark through FileIO: Parquet by field id, the positions of
deletion vectors, and a file group's live rows with the spec's delete rules applied."""
