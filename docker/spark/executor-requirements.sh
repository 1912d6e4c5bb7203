#!/usr/bin/env sh
# Prints the requirements.txt pins of the named packages, one per line, for the Spark image.
#
# Executors need only what Python workers import (pyarrow and pandas for pandas UDFs, fastavro,
# SQLAlchemy/psycopg2 for catalog access, ...), not Airflow or PySpark itself (the image's Spark
# ships pyspark.zip). Taking the versions from requirements.txt keeps the driver (Airflow image)
# and the executors on one set of pins; a package missing or unpinned there is a build error,
# never a silent "latest".
#
# Usage: executor-requirements.sh REQUIREMENTS_TXT PACKAGE...
set -eu

requirements="$1"
shift
status=0
for package in "$@"; do
    # Pins look like `name==1.2.3` or `name[extra]==1.2.3`; names compare case-insensitively.
    pin=$(grep -iE "^${package}(\[[^]]*\])?==[^[:space:]]+" "$requirements" | head -n 1 || true)
    if [ -z "$pin" ]; then
        echo "executor-requirements: $package has no '==' pin in $requirements" >&2
        status=1
        continue
    fi
    printf '%s\n' "$pin" | sed -E 's/\[[^]]*\]//'
done
exit "$status"
