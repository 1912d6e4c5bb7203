"""Maintenance actions without an engine: planners and commit batching (Java's `actions`).

What a job rewrites and how it commits is decided here, from metadata alone; an engine
(`spark_jobs`) only reads and writes the files of the plan.
"""
