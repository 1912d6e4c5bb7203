"""The error a job raises for a condition its user can act on.

The command-line wrapper prints such an error as one line naming the cause, with no
traceback: bad input is not a bug in the job.
"""

from __future__ import annotations


class JobError(Exception):
    """A job cannot go on: bad input, a table that does not fit, a conflicting commit."""
