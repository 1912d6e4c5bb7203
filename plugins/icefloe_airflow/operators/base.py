"""The base of every job operator: `spark-submit spark_jobs/<job>.py` through the Spark
provider's SparkSubmitOperator, with the catalog from the `iceberg_default` connection.

What it adds to SparkSubmitOperator:
- the application is the job file of the installed `spark_jobs` package, and `icecore` +
  `spark_jobs` travel to the executors as a `--py-files` zip (built once per source version);
- `table` and `options` (templated) become the job's command line; the catalog settings come
  from the Iceberg connection, so no DAG holds a database URI (the URI itself travels in the
  job's environment, never on a command line that logs and process listings show);
- maintenance jobs hold the table's lock in the MaintenanceStore while they run (never two
  maintenance jobs on one table; ingestion does not take it and keeps running);
- every run is recorded (running -> success/failed) for the policy and the UI;
- the job's JSON result (its last output line that is a JSON object) is logged and returned,
  so it lands in XCom; a failure raises AirflowException carrying the job's one-line cause
  (`ExceptionType: message`), which is what the Airflow UI then shows.

The result is read from spark-submit's own output, so it needs client deploy mode (the
default, and the only mode for Python applications on a standalone cluster).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from icecore.errors import ValidationError
from icecore.expressions.parser import parse_filter
from icefloe_airflow.forms import job_options_from_params
from icefloe_airflow.hook import IcebergHook
from icefloe_airflow.results import describe
from icefloe_airflow.state import MaintenanceStore, TableBusyError, run_owner
from spark_jobs.specs import JOBS, JobOptions, JobSpec, Option, OptionError
from spark_jobs.specs.options import BOOLEAN, FILTER

# Catalog flags come from the Iceberg connection; an option may not set them.
CATALOG_OPTIONS = frozenset({"catalog_uri", "catalog_name", "warehouse", "catalog_property"})
# `NoSuchTableError: db.t does not exist`: a single identifier with a lowercase letter (not
# a `WARNING:` banner, not a Spark log line, which starts with a date), a colon, a message.
_CAUSE_LINE = re.compile(r"^[A-Za-z_]*[a-z][A-Za-z0-9_]*: \S.*$")
_OUTPUT_LINES_KEPT = 5000
# The job leaves Spark's log levels alone when the operator configured them (see
# `_spark_logging`); run by hand, it turns Spark down to warnings itself.
SPARK_LOGGING_ENV = "ICEFLOE_SPARK_LOGGING"
SPARK_LOG4J2 = """\
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
rootLogger.appenderRef.file.ref = file
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""
_MAX_ERROR = 2000


class Refused(AirflowFailException):
    """A run refused before anything started (a bad option, a missing table or source): the
    message is one line naming the field; retrying would only refuse again."""


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def checked_options(
    spec: JobSpec,
    table: Any,
    options: Mapping[str, Any],
    *,
    labels: Mapping[str, str] | None = None,
) -> JobOptions:
    """`options` (keys: field names, flags with or without `--`, dashes or underscores) as
    the job's checked options, or AirflowException with one line naming the option as the
    user knows it (`labels`: the form's titles) and what was expected. Empty values keep the
    job's default."""
    values: dict[str, Any] = {}
    for key, value in options.items():
        name = str(key).removeprefix("--").replace("-", "_")
        if name in CATALOG_OPTIONS or name == "table":
            raise Refused(
                f"{spec.name}: option {key!r} is set by the operator (its table argument and "
                "the Iceberg connection)"
            )
        try:
            option = spec.options.option_named(str(key))
        except KeyError:
            known = ", ".join(o.name for o in spec.options.options())
            raise Refused(f"{spec.name} has no option {key!r}; its options are: {known}") from None
        if _is_empty(value) or (value is False and option.kind is not BOOLEAN):
            continue  # the job's default (False leaves a non-switch out, as documented)
        values[option.name] = value
    try:
        checked = spec.options(table=table, **values)
        for option in checked.options():
            value = getattr(checked, option.name)
            if option.kind is FILTER and value is not None:
                _check_filter(option, value)
    except OptionError as exc:
        label = (labels or {}).get(exc.option.name) or exc.option.flag
        raise Refused(f"{label}: {exc.problem}") from None
    return checked


def _check_filter(option: Option, text: str) -> None:
    """A filter's syntax, as the job's parser reads it (the columns are checked against the
    table when the job plans)."""
    try:
        parse_filter(text)
    except ValidationError as exc:
        detail = str(exc).splitlines()[0].removeprefix("cannot parse filter: ")
        raise OptionError(option, f"cannot read {text!r} as a filter: {detail}") from None


def job_file(job: str) -> Path:
    """`spark_jobs/<job>.py` of the installed spark_jobs package."""
    spec = importlib.util.find_spec("spark_jobs")
    if spec is None or not spec.submodule_search_locations:
        raise AirflowException("the spark_jobs package is not installed (pip install icefloe)")
    path = Path(next(iter(spec.submodule_search_locations))) / f"{job}.py"
    if not path.is_file():
        raise AirflowException(f"no job file {path}")
    return path


def package_zip(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The `--py-files` zip of icecore + spark_jobs, rebuilt only when a source changes.

    Its name carries a digest of the sources' paths, sizes and modification times, so
    concurrent tasks share one file and an edited checkout gets a new one; it is written under
    a temporary name and renamed, so no task ever ships a half-written zip.
    """
    from spark_jobs.common.packaging import PACKAGES, ROOT, build_zip  # noqa: PLC0415

    directory = Path(
        cache_dir
        or os.environ.get("ICEFLOE_CACHE_DIR")
        or Path(tempfile.gettempdir()) / f"icefloe-{os.getuid()}"
    )
    digest = hashlib.sha256()
    for package in PACKAGES:
        for source in sorted((ROOT / package).rglob("*.py")):
            stat = source.stat()
            digest.update(
                f"{source.relative_to(ROOT)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode()
            )
    target = directory / f"icefloe-{digest.hexdigest()[:16]}.zip"
    if not target.is_file():
        partial = build_zip(directory / f".{target.name}.{os.getpid()}.tmp")
        os.replace(partial, target)
    return target


def parse_result(lines: Iterable[str]) -> dict[str, Any] | None:
    """The last line that is a JSON object (the job's counters), or None."""
    for line in reversed(list(lines)):
        text = line.strip()
        if text.startswith("{") and text.endswith("}"):
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def failure_cause(lines: Iterable[str]) -> str | None:
    """The job's one-line cause (`ExceptionType: message`): the last line shaped like one."""
    for line in reversed(list(lines)):
        text = line.strip()
        if _CAUSE_LINE.match(text):
            return text
    return None


class _OutputTail:
    """Keeps the last lines of spark-submit's output (stdout and stderr are merged)."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=_OUTPUT_LINES_KEPT)

    def tee(self, lines: Iterator[Any]) -> Iterator[Any]:
        for line in lines:
            self.lines.append(str(line).rstrip("\n"))
            yield line


class IcefloeJobOperator(SparkSubmitOperator):
    """Runs one of icefloe's Spark jobs on `table`; returns (and pushes to XCom) its result.

    :param table: the table, `namespace.name` (templated).
    :param options: the job's options (templated; a JSON object string is accepted): keys
        are option names or flags, values typed or as text (`{"target_file_size_bytes":
        "128MB", "rewrite-all": True}`); see the job's options class in
        `spark_jobs.specs.jobs`. Checked before anything else runs.
    :param from_params: take the table and the options from the DAG run's params (the
        job's trigger form, see `icefloe_airflow.forms`); `options` still apply beneath.
    :param iceberg_conn_id: the Iceberg connection (catalog URI, name, warehouse).
    :param conn_id: the Spark connection (master: local[*], spark://, yarn, k8s://).
    :param name: the Spark application name (default `icefloe-<job>`).
    :param lock_wait: seconds to wait for another maintenance job on the table to finish.
    :param lock_ttl: seconds a lock outlives a worker that died without releasing it.
    """

    job: ClassVar[str]

    template_fields = (*SparkSubmitOperator.template_fields, "table", "options")
    ui_color = "#d7ecf7"

    def __init__(
        self,
        *,
        table: str | None = None,
        options: dict[str, Any] | str | None = None,
        from_params: bool = False,
        iceberg_conn_id: str = IcebergHook.default_conn_name,
        conn_id: str = "spark_default",
        name: str | None = None,
        lock_wait: float = 3600.0,
        lock_ttl: float = 600.0,
        **kwargs: Any,
    ) -> None:
        for managed in ("application", "application_args"):
            if managed in kwargs:
                raise TypeError(f"{type(self).__name__} sets {managed} itself; use table/options")
        if table is None and not from_params:
            raise TypeError(f"{type(self).__name__} needs a table (or from_params=True)")
        super().__init__(conn_id=conn_id, name=name or f"icefloe-{self.job}", **kwargs)
        self.table = table
        self.options = options
        self.from_params = from_params
        self.iceberg_conn_id = iceberg_conn_id
        self.lock_wait = lock_wait
        self.lock_ttl = lock_ttl
        self.catalog_name = "default"  # the connection's, once execute has read it
        self._output = _OutputTail()

    @property
    def spec(self) -> JobSpec:
        return JOBS[self.job]

    @property
    def maintenance(self) -> bool:
        return self.spec.maintenance

    # What the job gets ---------------------------------------------------------------------

    def job_options(self, context: Context) -> dict[str, Any]:
        """The raw options: the run's form fields (with `from_params`), then `options`
        (subclasses add their own arguments here)."""
        options = self.options
        if isinstance(options, str):
            options = json.loads(options) if options.strip() else None
        if options is not None and not isinstance(options, Mapping):
            raise AirflowException(f"options must be a mapping of job options, got {options!r}")
        merged = dict(options or {})
        if self.from_params:
            merged.update(job_options_from_params(self.spec, context.get("params") or {}))
        return merged

    def checked_options(self, context: Context) -> JobOptions:
        """Every option checked by the job's own declaration (see `checked_options`); the
        table too, and named as the form shows them when they came from it."""
        table = self.table
        labels: dict[str, str] = {}
        if self.from_params:
            params = context.get("params") or {}
            table = params.get("table") if self.table is None else table
            labels = {o.name: f'"{o.title}"' for o in self.spec.options.options()}
        if _is_empty(table):
            label = labels.get("table", "table")
            raise Refused(f"{label}: required: the table as NAMESPACE.NAME")
        return checked_options(
            self.spec, str(table).strip(), self.job_options(context), labels=labels
        )

    def build_application_args(self, hook: IcebergHook, options: JobOptions) -> list[str]:
        """The job's full command line after the application path."""
        return [*hook.job_args(include_uri=False), *options.to_argv()]

    # Running ---------------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        self.log.info("checking the options of %s and its table", self.job)
        hook = IcebergHook(self.iceberg_conn_id)
        try:
            try:
                options = self.checked_options(context)
                self.table = options.table  # type: ignore[attr-defined]
                self.preflight(hook, options)
            except Refused as refused:
                self.log.error("refused: %s", refused)  # the task log's one line
                raise
            self.catalog_name = hook.settings().name
            self.application = str(job_file(self.job))
            self.py_files = ",".join(p for p in (str(package_zip()), self.py_files) if p)
            self.application_args = self.build_application_args(hook, options)
            self.env_vars = {
                **(self.env_vars or {}),
                **hook.job_env(),
                **self._spark_logging(context),
            }
            store = hook.state_store()
            result = self._run_recorded(store, context)
        finally:
            hook.close()
        self.log.info("%s on %s: %s", self.job, self.table, describe(self.job, result))
        self.log.info("result: %s", json.dumps(result, sort_keys=True))
        self.on_result(result, context)
        return result

    def _spark_logging(self, context: Context) -> dict[str, str]:
        """Spark's own log at WARN in the task log, all of it (INFO) in a file named in the
        task log: people read the job's lines, and the full driver log is there when a Spark
        problem needs it. Returns the job's environment for it."""
        ti = context["ti"]
        name = f"{ti.dag_id}__{ti.run_id}__{ti.task_id}__{ti.try_number}"
        directory = Path(
            os.environ.get("ICEFLOE_SPARK_LOG_DIR")
            or Path(tempfile.gettempdir()) / f"icefloe-spark-logs-{os.getuid()}"
        )
        directory.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", name)
        log_file = directory / f"{safe}.log"
        properties = directory / f"{safe}.log4j2.properties"
        properties.write_text(SPARK_LOG4J2.format(log_file=log_file))
        option = f"-Dlog4j2.configurationFile=file:{properties}"
        conf = dict(self.conf or {})
        existing = conf.get("spark.driver.extraJavaOptions", "")
        conf["spark.driver.extraJavaOptions"] = f"{existing} {option}".strip()
        self.conf = conf
        self.log.info("full Spark driver log (INFO and above): %s", log_file)
        return {SPARK_LOGGING_ENV: "configured"}

    def preflight(self, hook: IcebergHook, options: JobOptions) -> None:
        """Refuse, in one line and in a second, what the job would refuse after starting
        Spark: a table that does not exist (one catalog call). Runs before anything is
        recorded, so a refused run leaves no trace on the Iceberg page."""
        if not hook.get_catalog().table_exists(self.table):
            raise Refused(f"table {self.table} does not exist in catalog {hook.settings().name!r}")

    def on_result(self, result: dict[str, Any], context: Context) -> None:
        """Called after success with the job's result (the ingest operator emits its asset)."""

    def _run_recorded(self, store: MaintenanceStore, context: Context) -> dict[str, Any]:
        ti = context["ti"]
        identity = {
            "dag_id": ti.dag_id,
            "run_id": ti.run_id,
            "task_id": ti.task_id,
            "try_number": ti.try_number,
        }
        owner = run_owner(ti.dag_id, ti.run_id, ti.task_id, ti.try_number)
        store.abandon_earlier_tries(self.table, **identity)
        with ExitStack() as held:
            if self.maintenance:
                try:
                    held.enter_context(
                        store.lock(
                            self.table,
                            owner,
                            ttl=timedelta(seconds=self.lock_ttl),
                            wait=timedelta(seconds=self.lock_wait),
                            poll=min(5.0, max(0.1, self.lock_wait / 10)),
                        )
                    )
                except TableBusyError as exc:
                    run_pk = store.start_run(self.table, self.job, **identity)
                    store.finish_run(run_pk, state="failed", error=str(exc))
                    raise AirflowException(str(exc)) from exc
            run_pk = store.start_run(self.table, self.job, **identity)
            try:
                result = self._submit(context)
            except BaseException as exc:
                store.finish_run(run_pk, state="failed", error=str(exc)[:_MAX_ERROR])
                raise
            store.finish_run(run_pk, state="success", result=result)
        return result

    def _submit(self, context: Context) -> dict[str, Any]:
        """spark-submit, then the result from its output (or the job's cause on failure)."""
        self._output = _OutputTail()
        self._hook = None  # a fresh hook per try, built by _get_hook with the capture
        try:
            super().execute(context)
        except AirflowException as exc:
            cause = failure_cause(self._output.lines)
            if cause is None:
                raise
            raise AirflowException(f"{self.job} failed on {self.table}: {cause}") from exc
        result = parse_result(self._output.lines)
        if result is None:
            raise AirflowException(
                f"{self.job} on {self.table}: spark-submit succeeded but printed no JSON result "
                "(cluster deploy mode does not return the driver's output; use client mode)"
            )
        return result

    def _get_hook(self) -> SparkSubmitHook:
        """The provider's hook, its output also kept for the result and the failure cause.

        The hook logs each line of spark-submit's merged stdout/stderr from an iterator; we
        hand it a tee of that iterator, so logging stays the provider's.
        """
        hook = super()._get_hook()
        process: Callable[[Iterator[Any]], None] = hook._process_spark_submit_log
        output = self._output

        def process_and_keep(lines: Iterator[Any]) -> None:
            process(output.tee(lines))

        hook._process_spark_submit_log = process_and_keep  # type: ignore[method-assign]
        return hook
