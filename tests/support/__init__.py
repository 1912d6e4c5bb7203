"""Helpers shared by the tests: a writer of real tables, a reference reader, engine fixtures."""
