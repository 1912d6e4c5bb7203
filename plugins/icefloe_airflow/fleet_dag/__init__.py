"""The fleet DAG: one per catalog of `tables.yaml`'s `fleets`, running the maintenance the
fleet engine (`icefloe_airflow.fleet`) chooses, with the job operators.

    dag      -> the DAG's shape: plan, then each chosen table's due jobs in order
    tasks    -> what its tasks do at run time (plan the run, the operators' outcome)
    metrics  -> the fleet's metrics, through Airflow's own

This is the Airflow side of the fleet; the `icefloe` command (`icefloe_airflow.command`)
shares the engine without it. `dags/icefloe_fleet.py` builds the DAGs (`dag.fleet_dags`).
"""
