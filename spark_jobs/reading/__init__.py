"""Reading a table's live files and rows in Spark, with the spec's delete rules applied."""
