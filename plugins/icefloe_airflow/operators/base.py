"""The base of every job operator: `spark-submit spark_jobs/<job>.py` through the Spark
provider's SparkSubmitOperator, or the job as a client of a Spark Connect server, with the
catalog from the `iceberg_default` connection.

What it adds to SparkSubmitOperator:
- the application is the launcher of the installed `spark_jobs` package (`main.py <job>`),
  and `icecore` +
  `spark_jobs` travel to the executors as a `--py-files` zip (built once per source version);
- `table` and `options` (templated) become the job's command line; the catalog settings come
  from the Iceberg connection (SQL or REST), so no DAG holds a URI (the URI and any credential
  travel in the job's environment, never on a command line that logs and process listings
  show);
- maintenance jobs hold the table's lock in icefloe's state store while they run (never two
  maintenance jobs on one table; ingestion does not take it and keeps running); a deferrable
  one waits for a leased table in the triggerer, not in its worker slot
  (`icefloe_airflow.lease_wait`);
- every run is recorded (running -> success/failed) for the policy and the UI, and after a
  success the table's health too (the page's charts);
- the job's JSON result is logged in words and returned, so it lands in XCom; a failure
  raises AirflowException carrying the job's one-line cause (`ExceptionType: message`),
  which is what the Airflow UI then shows. Both come from the result file the job writes
  (`icecore.jobs.argv.RESULT_FILE_ENV`), so nothing of the provider's hook is overridden
  and no output is parsed; the driver must run here (client deploy mode, the default and the
  only mode for Python applications on a standalone cluster).

Given a Spark Connect connection (`spark_connect_conn_id`, the Spark provider's type), the task
runs no spark-submit: the job is `python -m spark_jobs <job> ...` in a process of the worker,
the server's client (it plans and commits here, the server runs its Spark work), with the
server's URL in its environment (`SPARK_REMOTE`: the URL may carry a token). Everything else
is as above: the same command line after the launcher, the same checks and refusals before it
starts, the same lease, run record, result file and XCom, and its output lines in the task log
(`icefloe_airflow.job_process`, shared with `icefloe run`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context, conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from icecore.errors import ValidationError
from icecore.expressions.parser import parse_filter
from icecore.jobs import JOBS, JobOptions, JobSpec, Option, OptionError
from icecore.jobs.argv import RESULT_FILE_ENV
from icecore.jobs.options import BOOLEAN, FILTER, PARTITION_SPEC, SORT_ORDER
from icecore.spec.terms import parse_partition_terms, parse_sort_terms
from icefloe_airflow.forms import job_options_from_params
from icefloe_airflow.hook import IcebergHook, spark_connect_url
from icefloe_airflow.job_process import (
    connect_command,
    connect_environment,
    launcher,
    read_outcome,
    shown_remote,
    spark_log,
    start_job,
    stop_job,
    stream_lines,
)
from icefloe_airflow.lease_wait import LeaseFreeTrigger, now_ms
from icefloe_airflow.links import IcebergTableLink
from icefloe_airflow.provider_info import CONFIG_SECTION, SPARK_CONNECT_OPTION
from icefloe_airflow.results import describe
from icefloe_airflow.state import MaintenanceStore, TableBusyError, run_owner
from icefloe_airflow.table_health import check_table, table_policy_of

# Catalog flags come from the Iceberg connection; an option may not set them.
CATALOG_OPTIONS = frozenset(
    {"catalog_uri", "catalog_type", "catalog_name", "warehouse", "catalog_property"}
)
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
            if option.cli_required and value is None:
                raise OptionError(option, f"required: {option.kind.expected}")
            if value is not None and option.kind.name in _SYNTAX:
                _check_syntax(option, value)
    except OptionError as exc:
        raise Refused(_refusal(exc, labels)) from None
    return checked


def _refusal(exc: OptionError, labels: Mapping[str, str] | None) -> str:
    """The refusal in the caller's words: the form's titles and its switch for a form's run,
    the option names for options given in code."""
    if labels:
        label = labels.get(exc.option.name) or f'"{exc.option.title}"'
        force = exc.force and (labels.get(exc.force.name) or f'"{exc.force.title}"')
        return f"{label}: {exc.in_words(f'switch on {force} in the form')}"
    force_option = exc.force.name if exc.force else ""
    return f"{exc.option.flag}: {exc.in_words(f'set {force_option}=True in the options')}"


def _check_syntax(option: Option, text: str) -> None:
    """A filter's, sort order's or partition spec's syntax, as the job's parser reads it
    (the columns are checked against the table when the job plans)."""
    try:
        _SYNTAX[option.kind.name](text)
    except ValidationError as exc:
        detail = str(exc).splitlines()[0].removeprefix("cannot parse filter: ")
        raise OptionError(option, f"cannot read {text!r} as {option.kind.name}: {detail}") from None


_SYNTAX: dict[str, Callable[[str], object]] = {
    FILTER.name: parse_filter,
    SORT_ORDER.name: parse_sort_terms,
    PARTITION_SPEC.name: parse_partition_terms,
}


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


class IcefloeJobOperator(SparkSubmitOperator):
    """Runs one of icefloe's Spark jobs on `table`; returns (and pushes to XCom) its result.

    :param job: the job (a name of `icecore.jobs.jobs.JOBS`); the job classes in
        `icefloe_airflow.operators.jobs` set it, a new job can be run without a class of its own.
    :param table: the table, `namespace.name` (templated).
    :param options: the job's options (templated; a JSON object string is accepted): keys
        are option names or flags, values typed or as text (`{"target_file_size_bytes":
        "128MB", "rewrite-all": True}`); see the job's options class in
        `icecore.jobs.jobs`. Checked before anything else runs.
    :param from_params: take the table and the options from the DAG run's params (the
        job's trigger form, see `icefloe_airflow.forms`); `options` still apply beneath.
    :param iceberg_conn_id: the Iceberg connection (an `icefloe` or an `iceberg` one).
    :param conn_id: the Spark connection (master: local[*], spark://, yarn, k8s://).
    :param spark_connect_conn_id: a Spark Connect connection (type `spark_connect`; templated):
        run the job as that server's client instead of spark-submitting it (`conn_id` and
        spark-submit's settings are then unused). Default: the deployment's
        `[icefloe] spark_connect_conn_id`; `""` spark-submits whatever that says.
    :param name: the Spark application name (default `icefloe-<job>`).
    :param lock_wait: seconds to wait for another maintenance job on the table to finish.
    :param deferrable: wait for that job in the triggerer (`LeaseFreeTrigger`), not in this
        task's worker slot (default: Airflow's `[operators] default_deferrable`).
    :param lock_ttl: seconds a lock outlives a worker that died without releasing it.
    """

    job: str = ""  # the job's name in icecore.jobs.jobs.JOBS (subclasses set it)

    template_fields = (
        *SparkSubmitOperator.template_fields,
        "table",
        "options",
        "spark_connect_conn_id",
    )
    operator_extra_links = (IcebergTableLink(),)
    ui_color = "#d7ecf7"

    def __init__(
        self,
        *,
        job: str | None = None,
        table: str | None = None,
        options: dict[str, Any] | str | None = None,
        from_params: bool = False,
        iceberg_conn_id: str = IcebergHook.default_conn_name,
        conn_id: str = "spark_default",
        spark_connect_conn_id: str | None = None,
        name: str | None = None,
        lock_wait: float = 3600.0,
        lock_ttl: float = 600.0,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        for managed in ("application", "application_args"):
            if managed in kwargs:
                raise TypeError(f"{type(self).__name__} sets {managed} itself; use table/options")
        if table is None and not from_params:
            raise TypeError(f"{type(self).__name__} needs a table (or from_params=True)")
        if job is not None:
            self.job = job
        if self.job not in JOBS:
            raise TypeError(f"unknown job {self.job!r}; the jobs are: {', '.join(JOBS)}")
        super().__init__(conn_id=conn_id, name=name or f"icefloe-{self.job}", **kwargs)
        self.table = table
        self.options = options
        self.from_params = from_params
        self.iceberg_conn_id = iceberg_conn_id
        if spark_connect_conn_id is None:
            spark_connect_conn_id = conf.get(CONFIG_SECTION, SPARK_CONNECT_OPTION, fallback="")
        self.spark_connect_conn_id = spark_connect_conn_id or None
        self.lock_wait = lock_wait
        self.lock_ttl = lock_ttl
        self.deferrable = deferrable
        self._lease_deadline_ms: int | None = None  # a deferred lease wait's end, once begun
        self.catalog_name = "default"  # the connection's, once execute has read it
        self._remote: str | None = None  # the Connect server's URL, once execute has read it
        self._process: subprocess.Popen[str] | None = None  # the Connect client, while it runs

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
        """The job's full command line after the launcher's path: the job, then its flags."""
        return [self.job, *hook.job_args(include_uri=False), *options.to_argv()]

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
            self.application_args = self.build_application_args(hook, options)
            self.env_vars = {**(self.env_vars or {}), **hook.job_env()}
            if self.spark_connect_conn_id:
                self._remote = self._connect_url()
            else:
                self.application = str(launcher())
                self.py_files = ",".join(p for p in (str(package_zip()), self.py_files) if p)
                self.env_vars.update(self._spark_logging(context))
            store = hook.state_store()
            result = self._run_recorded(store, context)
            self._record_health(hook, store)
        finally:
            hook.close()
        self.log.info("%s on %s: %s", self.job, self.table, describe(self.job, result))
        self.log.info("result: %s", json.dumps(result, sort_keys=True))
        self.on_result(result, context)
        return result

    def _connect_url(self) -> str:
        """The Spark Connect connection's URL; a connection that cannot be one is refused
        before anything is recorded."""
        try:
            return spark_connect_url(str(self.spark_connect_conn_id))
        except ValueError as exc:
            self.log.error("refused: %s", exc)
            raise Refused(str(exc)) from None

    def _spark_logging(self, context: Context) -> dict[str, str]:
        """Spark's own log at WARN in the task log, all of it (INFO) in a file named in the
        task log (`job_process.spark_log`). Returns the job's environment for it."""
        ti = context["ti"]
        log = spark_log(f"{ti.dag_id}__{ti.run_id}__{ti.task_id}__{ti.try_number}")
        conf = dict(self.conf or {})
        existing = conf.get("spark.driver.extraJavaOptions", "")
        conf["spark.driver.extraJavaOptions"] = f"{existing} {log.java_option}".strip()
        self.conf = conf
        self.log.info(log.announcement)
        return log.env

    def preflight(self, hook: IcebergHook, options: JobOptions) -> None:
        """Refuse, in one line and in a second, what the job would refuse after starting
        Spark: a table that does not exist (one catalog call). Runs before anything is
        recorded, so a refused run leaves no trace on the Iceberg page."""
        if not hook.get_catalog().table_exists(self.table):
            raise Refused(f"table {self.table} does not exist in catalog {hook.settings().name!r}")

    def in_callers_words(self, cause: str) -> str:
        """A job's cause names its command line's `--force`; a run from the trigger form says
        the form's switch instead (the checks that need the table run in the job)."""
        try:
            force = self.spec.options.option_named("force")
        except KeyError:
            return cause
        if not self.from_params:
            return cause.replace(f"pass {force.flag}", f"set {force.name}=True in the options")
        return cause.replace(f"pass {force.flag}", f'switch on "{force.title}" in the form')

    def _record_health(self, hook: IcebergHook, store: MaintenanceStore) -> None:
        """The table's health after the job, in the health history the Iceberg page charts
        (metadata only); a check that cannot be made is logged, never a failure of the job."""
        try:
            table = hook.get_catalog().load_table(str(self.table))
            policy = table_policy_of(str(self.table), table.metadata.properties)
            _, assessment = check_table(table, str(self.table), store, policy, source="job")
        except Exception as exc:
            self.log.warning("health of %s after %s not recorded: %s", self.table, self.job, exc)
            return
        self.log.info("%s: health score %d after %s", self.table, assessment.score, self.job)

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
                            wait=timedelta(seconds=0 if self.deferrable else self.lock_wait),
                            poll=self._lock_poll,
                        )
                    )
                except TableBusyError as exc:
                    if self.deferrable:
                        self._defer_for_lease(exc)  # returns once the wait is over
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

    @property
    def _lock_poll(self) -> float:
        return min(5.0, max(0.1, self.lock_wait / 10))

    def _defer_for_lease(self, busy: TableBusyError) -> None:
        """Defer to `LeaseFreeTrigger` while the table is leased, unless the wait (`lock_wait`
        from the first try at the lease) is over: then return, and the caller records and
        raises `busy` as a blocking wait would."""
        deadline = self._lease_deadline_ms or now_ms() + int(self.lock_wait * 1000)
        if now_ms() >= deadline:
            return
        self.log.info(
            "%s; waiting for it in the triggerer, this worker slot freed, for up to %.0f s",
            busy,
            (deadline - now_ms()) / 1000,
        )
        self.defer(
            trigger=LeaseFreeTrigger(
                self.iceberg_conn_id, str(self.table), deadline, poll_seconds=self._lock_poll
            ),
            method_name="execute_after_lease_wait",
        )

    def execute_after_lease_wait(
        self, context: Context, event: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Back from `LeaseFreeTrigger`: run as `execute` does (the checks again, then the
        lease), within the wait that the first try began."""
        event = event or {}
        self._lease_deadline_ms = int(event.get("deadline_ms") or now_ms())
        if event.get("free"):
            # The table the trigger waited for: a form-driven operator names its table only
            # once `execute` reads the run's conf, which it has not yet done on resuming.
            self.log.info("the lease on %s is free: taking it", event.get("table"))
        return self.execute(context)

    def _submit(self, context: Context) -> dict[str, Any]:
        """spark-submit; the job's result, or its one-line cause on failure, from the result
        file the job writes (`RESULT_FILE_ENV`): nothing of Spark's output is parsed."""
        handle, name = tempfile.mkstemp(prefix="icefloe-result-", suffix=".json")
        os.close(handle)
        result_file = Path(name)
        result_file.unlink()
        self.env_vars = {**(self.env_vars or {}), RESULT_FILE_ENV: str(result_file)}
        try:
            try:
                if self._remote is None:
                    super().execute(context)
                else:
                    self._run_connect_client(self._remote)
            except AirflowException as exc:
                cause = read_outcome(result_file).get("cause")
                if cause is None:
                    raise
                cause = self.in_callers_words(cause)
                raise AirflowException(f"{self.job} failed on {self.table}: {cause}") from exc
            result = read_outcome(result_file).get("result")
        finally:
            result_file.unlink(missing_ok=True)
        if not isinstance(result, dict):
            raise AirflowException(
                f"{self.job} on {self.table}: the job succeeded but left no result "
                "(spark-submit's cluster deploy mode runs the driver elsewhere; use client mode)"
            )
        return result

    def _run_connect_client(self, remote: str) -> None:
        """The job as the Spark Connect server's client, in a process of this worker; its
        output lines into the task log as they come. AirflowException if it fails."""
        command = connect_command(self.application_args)
        env = connect_environment(remote, {**os.environ, **(self.env_vars or {})})
        self.log.info(
            "running %s as a client of the Spark Connect server %s (connection %s): %s",
            self.job,
            shown_remote(remote),
            self.spark_connect_conn_id,
            " ".join(command),
        )
        self._process = start_job(command, env)
        try:
            code = stream_lines(self._process, self.log.info)
        finally:
            stop_job(self._process)  # ended already, unless this task is being stopped
            self._process = None
        if code != 0:
            raise AirflowException(f"{self.job} exited with status {code}")

    def on_kill(self) -> None:
        """Stop the Connect client this task runs, else spark-submit (the provider's)."""
        process = self._process
        if process is not None:
            stop_job(process)
        else:
            super().on_kill()
