"""icefloe for Airflow: the Iceberg hook, one operator per Spark job, the table-health policy
and the maintenance state (locks, run history) shared by the DAGs and the UI page.

Airflow puts the plugins folder on `sys.path`, so this package is imported by its absolute
name everywhere (`from icefloe_airflow.hook import IcebergHook`); `pip install -e .` installs
it too, for DAG files outside the plugins folder and for tests.
"""
