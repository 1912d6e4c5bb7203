"""Spark-side building blocks the maintenance jobs share (planning on the driver, reading
files by field id, writing grouped delete files, committing rewrites of delete files)."""
