"""icecore: the Apache Iceberg table spec (v1 read, v2 read and write) in plain Python.

No Spark and no Airflow here: the Spark jobs and the Airflow operators both build on it.
"""
