"""Maintaining a whole catalog: every table discovered, measured cheaply, ranked, budgeted.

    discovery  -> which tables (listed afresh from the catalog at each run)
    layering   -> each table's policy: defaults, namespace, table (tables.yaml), table properties
    checking   -> each table's health from metadata only, cached by metadata location
    ranking    -> due work ordered by what it saves readers, within the run's budget
    dag        -> the fleet DAG (one per catalog) that runs the chosen tables' due chains

Everything but `dag`, `metrics` and `tasks` imports no Airflow, so the `icefloe` command
starts fast.
"""
