"""What every Spark job shares: the command line, the Spark session, packaging, errors."""
