"""The fleet engine: a whole catalog maintained, every table discovered, measured cheaply,
ranked, budgeted.

    discovery  -> which tables (listed afresh from the catalog at each run)
    config     -> the fleets, their budgets and the namespace policy layers (tables.yaml)
    layering   -> each table's policy: defaults, namespace, table (tables.yaml), table properties
    checking   -> each table's health from metadata only, cached by metadata location (cache)
    runs       -> the run history of a whole catalog, read at once (last successes, waits)
    history    -> the health checks each survey records, and when a table was first seen
    ranking    -> due work ordered by what it saves readers, within the run's budget
    survey     -> all of the above for one run: the checked tables and the ranked due work

Nothing here imports Airflow (tests/test_layering.py checks): the engine serves both the
fleet DAG (`icefloe_airflow.fleet_dag`) and the `icefloe` command (`icefloe_airflow.command`),
which starts fast.
"""
