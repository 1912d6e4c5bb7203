"""Maintenance after any engine's commits (`schedule: asset`): one poll loop per catalog in
Airflow's triggerer, shared by every watcher of its tables (`trigger`), whose state lives in
icefloe's state store (`state`), and the Assets and watchers tables.yaml asks for
(`assets`)."""
