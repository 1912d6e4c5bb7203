"""What every Spark job shares: the command line, the Spark session, packaging, the Python
workers' FileIO and task numbers."""
