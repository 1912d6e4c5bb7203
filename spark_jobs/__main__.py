"""`python -m spark_jobs <job> [options]`: a job run locally (see `spark_jobs.common.cli`)."""

import sys

from spark_jobs.common.cli import main

sys.exit(main())
