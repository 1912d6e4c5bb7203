"""Maintenance actions without an engine (Java's `actions`): planners that decide from
metadata alone what an action rewrites, and how its commits batch; the engines (the driver's
threads, Spark tasks) only read and write the files of the plan."""
