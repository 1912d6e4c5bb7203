"""Files under table locations: listing them, deleting them, and keeping off other tables'."""
