"""The ingestion job's parts: options, sources, change resolution, positions and the commit.

`spark_jobs/ingest.py` is the entry point that puts them together.
"""
