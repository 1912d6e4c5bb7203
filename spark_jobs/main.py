"""Every job's entry point: `spark-submit spark_jobs/main.py <job> --table ... [options]`.

See `spark_jobs.common.cli` for the command line and its contract (JSON result last on
stdout, one-line cause last on stderr). Run as a script, this file's own directory would
come first on `sys.path` and make `spark_jobs`' subpackages importable under bare names
(`files`, `schema`, ...) that could shadow real modules: it is taken off before anything is
imported; `spark_jobs` itself comes from `--py-files` or the installed package.
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != here]
    from spark_jobs.common.cli import exit_process, main

    exit_process(main())
