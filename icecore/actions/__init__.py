"""Maintenance actions without an engine (Java's `actions`): what they plan from, planners that
decide from metadata alone what an action rewrites, the files one run writes, and how its
commits batch and are tried again after a conflict; the engines (the driver's threads, Spark
tasks) only read and write the files of the plan."""
