# Two entry points for a new user: `make demo` and `make test` (see README.md); `make ui` then
# opens the demo in the Airflow UI.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
UI_PORT ?= 8080
comma := ,
space := $(subst ,, )

.PHONY: demo ui test lint java browser node rest-server iceberg-java spark-connect

# `$(call quietly,WHAT,COMMAND)`: runs a long, silent COMMAND (pip), saying every 10 s that
# WHAT is still going, so a first `make demo` is never silent for minutes.
quietly = echo "$(1)"; ( $(2) ) & pid=$$!; s=0; \
	while kill -0 $$pid 2>/dev/null; do sleep 1; s=$$((s + 1)); \
	  [ $$((s % 10)) -ne 0 ] || ! kill -0 $$pid 2>/dev/null || echo "  ... $(1) ($${s}s)"; done; \
	wait $$pid

$(BIN)/activate: requirements.txt requirements-test.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is required" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	@$(call quietly,pip: upgrading pip,$(BIN)/pip install --quiet --upgrade pip)
	@$(call quietly,pip: installing Airflow$(comma) Spark and the test tools,$(BIN)/pip install --quiet -r requirements-test.txt)
	@$(call quietly,pip: installing icefloe,$(BIN)/pip install --quiet --no-deps -e .)
	@# The editable build leaves icefloe.egg-info in the checkout; from the checkout's root (on
	@# sys.path in tests and tools) Python would see the package twice, entry points included.
	rm -rf icefloe.egg-info
	touch $(BIN)/activate

# Spark needs a JVM; a fresh Debian machine may lack one.
java:
	@command -v java >/dev/null || { apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless; }

# The REST catalog tests compile and run Iceberg's REST server (tests/support/rest_server/): a JDK
# (javac) and Debian's SQLite and PostgreSQL JDBC drivers.
rest-server:
	@{ command -v javac >/dev/null && test -f /usr/share/java/sqlite-jdbc.jar && test -f /usr/share/java/postgresql.jar; } || { apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless libxerial-sqlite-jdbc-java libpostgresql-jdbc-java; }

# The tests' Iceberg Java writer (tests/support/java_writer/) and the Iceberg Java benchmarks run
# Spark 3.5.9 in a virtualenv of their own, .cache/iceberg-java-venv: PySpark 3.5.9 from PyPI.
iceberg-java: $(BIN)/activate rest-server
	@$(BIN)/python -c 'from tests.support.java_writer.venv import iceberg_java_jars, iceberg_java_python; iceberg_java_python(); iceberg_java_jars()'

# The UI test renders the Airflow page in headless Debian Chromium.
browser:
	@test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium; }

# The Azure tests run Azurite, from npm into .cache/node/ (its version: tests/support/objectstores.py).
node: $(BIN)/activate
	@command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
	@$(BIN)/python -c 'from tests.support.objectstores import ensure_azurite; ensure_azurite()'

# End to end on the embedded default, through Airflow: the ingest DAG commits CDC batches, the
# self-optimizing DAG maintains the table (local Spark, SQLite catalog and Airflow DB, ./warehouse).
demo: $(BIN)/activate java
	$(BIN)/python examples/demo.py warehouse

# The demo's Airflow in the foreground until Ctrl-C: api-server (http://localhost:$(UI_PORT)/),
# scheduler, dag-processor and triggerer on the home `make demo` wrote (examples/ui.py).
ui:
	@test -f warehouse/.airflow/airflow.cfg || { echo "make ui: no demo in ./warehouse yet: run make demo first" >&2; exit 2; }
	@$(MAKE) -s --no-print-directory $(BIN)/activate
	@$(BIN)/python examples/ui.py --port $(UI_PORT) warehouse

# A Spark Connect server from the pinned pyspark, in the foreground (Ctrl-C stops it), on
# 127.0.0.1:$(SPARK_CONNECT_PORT): a job run with SPARK_REMOTE=sc://localhost:$(SPARK_CONNECT_PORT)
# does its Spark work there, with no Spark start of its own. Python workers run this virtualenv.
SPARK_CONNECT_PORT ?= 15002
spark-connect: $(BIN)/activate java
	PYSPARK_PYTHON=$(abspath $(BIN))/python $(BIN)/spark-submit --master 'local[*]' \
		--class org.apache.spark.sql.connect.service.SparkConnectServer --name icefloe-spark-connect \
		--conf spark.connect.grpc.binding.address=127.0.0.1 \
		--conf spark.connect.grpc.binding.port=$(SPARK_CONNECT_PORT) \
		$(VENV)/lib/python*/site-packages/pyspark/jars/spark-connect_*.jar

# Dead code (vulture, set up in pyproject.toml) in the packages: the tests, benchmarks and
# examples count as their users but are not checked themselves. Exit 3 is "found some".
DEAD_CODE_CHECKED := icecore spark_jobs plugins dags
lint: $(BIN)/activate
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@found=$$($(BIN)/vulture $(DEAD_CODE_CHECKED) tests bench examples); status=$$?; \
	  [ $$status -eq 0 ] || [ $$status -eq 3 ] || { echo "$$found"; exit $$status; }; \
	  dead=$$(echo "$$found" | grep -E '^($(subst $(space),|,$(strip $(DEAD_CODE_CHECKED))))/'); \
	  [ -z "$$dead" ] || { echo "$$dead"; echo "unused code: remove it, or say in pyproject.toml's [tool.vulture] why it is used" >&2; exit 1; }

# Two workers (pytest-xdist): one session leaves part of the 2 cores idle while it waits on its
# servers and subprocesses; two finish the suite about 1.25x sooner here. Modules go whole to a
# worker, in collection order (the slow Airflow ones first), those of the Airflow deployment to
# the same one (tests/support/workers.py).
test: $(BIN)/activate java browser node rest-server iceberg-java lint
	$(BIN)/python -m pytest -n 2 --no-loadscope-reorder
