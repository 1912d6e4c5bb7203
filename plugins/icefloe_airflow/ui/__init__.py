"""The icefloe page in the Airflow UI: every maintained table's health, what is due and the
last maintenance runs (`status` gathers the data, `app` serves it as HTML and JSON)."""
