"""Committing the rewrite jobs' work: batches, re-planning, cleanup, validated rewrites."""
