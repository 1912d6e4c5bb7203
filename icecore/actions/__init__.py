"""Planners of maintenance actions, engine-neutral: they decide from metadata what an action
does, and the engines (the driver's threads, Spark tasks) only execute the plan."""
