"""Files under table locations, in Spark tasks: listing them, taking them out through the
table's trash or deleting them (which files to keep: `icecore.actions.other_tables`)."""
