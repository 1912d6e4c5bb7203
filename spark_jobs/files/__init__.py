"""Files under table locations: listing them, taking them out through the table's trash or
deleting them, and keeping off other tables'."""
