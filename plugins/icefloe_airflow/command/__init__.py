"""The `icefloe` command: a catalog's fleet and its jobs from a terminal, with no Airflow.

    cli     -> the command line: the flags every subcommand shares, the subcommands, refusals
    common  -> what every subcommand is given (`Invocation`) and may open (catalog, state store)
    report  -> `tables`, `health`, `due`: what the fleet engine (`icefloe_airflow.fleet`) sees
    output  -> how `health` and `due` print, for people and for scripts
    run     -> `run`: one job on one table, as the Airflow operator runs it
    trash   -> `trash`, `restore`: a table's trash (`icecore.trash`), and the way back

A group of subcommands is one module declaring its `SUBCOMMANDS`, listed in `cli.GROUPS`.
Nothing here imports Airflow (tests/test_layering.py checks), so the command starts in well
under a second and runs where Airflow is not installed; the fleet DAG that shares the engine
is `icefloe_airflow.fleet_dag`.
"""
