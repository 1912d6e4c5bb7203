"""What every Spark job shares: the command line, the Spark session, packaging, errors, the
conflict-retry adapter, the Python workers' FileIO and task numbers."""
