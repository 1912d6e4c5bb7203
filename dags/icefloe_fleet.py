"""Fleet maintenance: one DAG per catalog listed under `fleets:` in `tables.yaml`.

Each run discovers every table of the catalog, checks its health from metadata (cached by
metadata location), ranks the due tables by what maintenance saves their readers, and runs
the chosen ones' due jobs within the budget (tables, bytes rewritten, Spark applications),
each under the table's lease. New tables are picked up with no config change; a table's
owner sets its policy in table properties (`icefloe.maintenance.enabled=false`, ...). See
`icefloe_airflow.fleet_dag` (the DAG) and `icefloe_airflow.fleet` (the engine it shares with
the `icefloe` command). Per-table DAGs (`icefloe_self_optimizing.py`) keep working beside it.
"""

from __future__ import annotations

from icefloe_airflow.fleet_dag.dag import fleet_dags

for dag in fleet_dags():
    globals()[dag.dag_id] = dag
