"""docker-compose.yaml and its images, checked without Docker (no engine runs here).

The file is validated against the official compose-spec JSON schema (the copy check-jsonschema
vendors, pinned in requirements-test.txt), after the `${VAR:-default}` interpolation Compose
applies with no `.env`, since that is the document `docker compose up` validates. The rest checks
what a schema cannot: that the stack agrees with the repository (pins, mounted folders, the
connections' targets, the database the init script creates, the Python minor versions PySpark
needs to match), so a version bump or a renamed service breaks a test here instead of a user's
first `docker compose up`.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml
from cryptography.fernet import Fernet
from icefloe_airflow.provider_info import get_provider_info
from icefloe_airflow.state import MaintenanceStore
from icefloe_airflow.state_db import ADMIN_URI_ENV, STATE_URI_ENV
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from icecore.catalog.sql import SqlCatalog
from tests.support.catalogs import POSTGRES_URI, postgres_unavailable
from tests.support.compose_files import (
    base_image,
    command_list,
    copies,
    depends_on,
    dockerfile_args,
    dockerfile_instructions,
    environment,
    ignored,
    image_tag,
    interpolate,
    is_bind,
    load_compose,
    mounts,
    requirement_pins,
)

REPO = Path(__file__).resolve().parent.parent
COMPOSE_FILE = REPO / "docker-compose.yaml"
AIRFLOW_DOCKERFILE = REPO / "docker" / "airflow" / "Dockerfile"
SPARK_DOCKERFILE = REPO / "docker" / "spark" / "Dockerfile"
SPARK_EXECUTOR_REQUIREMENTS = REPO / "docker" / "spark" / "executor-requirements.sh"

AIRFLOW_ROLES = ("api-server", "scheduler", "dag-processor", "triggerer")
# Secrets and settings every Airflow service must agree on (tokens signed by one are checked by
# another; connections encrypted by one are decrypted by another).
SHARED_AIRFLOW_ENV = (
    "AIRFLOW__API_AUTH__JWT_SECRET",
    "AIRFLOW__CORE__FERNET_KEY",
    "AIRFLOW__API__SECRET_KEY",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
    "AIRFLOW__CORE__EXECUTOR",
    "AIRFLOW__CORE__DAGS_FOLDER",
    "AIRFLOW__CORE__PLUGINS_FOLDER",
    "AIRFLOW_CONN_SPARK_DEFAULT",
    "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT",
    "AIRFLOW_CONN_ICEBERG_DEFAULT",
    "AIRFLOW__ICEFLOE__STATE_URI",
    "PYSPARK_PYTHON",
)
ICEBERG_EXTRAS = {"uri", "catalog_name", "warehouse", "properties"}
# What PySpark's Python workers import (pandas UDFs, Avro, deletion vectors, catalog access).
EXECUTOR_IMPORTS = {
    "pyarrow", "fastavro", "pyroaring", "sqlalchemy", "numpy", "pandas", "psycopg2-binary"
}  # fmt: skip
# The modules whose functions Spark tasks run (mapInArrow and pandas UDFs): a task imports them,
# and what they import, on the executors (spark-submit's or a Spark Connect server's).
TASK_MODULES = (
    "spark_jobs.reading.parquet_files", "spark_jobs.reading.deletion_vectors",
    "spark_jobs.writing.files", "spark_jobs.writing.deletion_vectors",
    "spark_jobs.writing.transforms", "spark_jobs.rewrite_data_files.in_tasks",
    "spark_jobs.convert_equality_deletes.in_tasks", "spark_jobs.ingest.object_source",
    "spark_jobs.files.listing", "spark_jobs.files.deletion",
)  # fmt: skip
# Present wherever PySpark runs: its own code (the image's Spark ships it), its optional psutil,
# setuptools' import hook, and the project itself (shipped by every job).
_SPARK_PROVIDES = {"pyspark", "pyspark-client", "py4j", "psutil", "setuptools", "icefloe"}


def connection(service: Mapping[str, Any], conn_id: str) -> dict[str, Any]:
    value = environment(service)[f"AIRFLOW_CONN_{conn_id.upper()}"]
    parsed = json.loads(value)
    assert isinstance(parsed, dict), f"AIRFLOW_CONN_{conn_id.upper()} must be a JSON object"
    return parsed


def airflow_services(compose: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Role (api-server, ..., init) -> service, found by the command each one runs."""
    roles: dict[str, dict[str, Any]] = {}
    for name, service in compose["services"].items():
        command = command_list(service)
        role = next((r for r in AIRFLOW_ROLES if command[:1] == [r]), None)
        if role is None and "airflow db migrate" in " ".join(command):
            role = "init"
        if role is not None:
            assert role not in roles, f"two services run Airflow's {role}: {name}"
            roles[role] = {**service, "name": name}
    return roles


CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_services(compose: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """ "master"/"worker"/"connect" -> service, by the class each one starts."""
    found = {}
    for name, service in compose["services"].items():
        command = command_list(service)
        for role in ("master", "worker"):
            if f"org.apache.spark.deploy.{role}.{role.capitalize()}" in command:
                found[role] = {**service, "name": name}
        if CONNECT_SERVER_CLASS in command:
            found["connect"] = {**service, "name": name}
    return found


def spark_conf(command: list[str]) -> dict[str, str]:
    """The `--conf key=value` settings of a spark-submit command."""
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def option(command: list[str], flag: str) -> str:
    assert flag in command, f"{flag} missing from {command}"
    return command[command.index(flag) + 1]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose(COMPOSE_FILE)


@pytest.fixture(scope="module")
def pins() -> dict[str, str]:
    return requirement_pins(REPO / "requirements.txt")


# --- the schema ----------------------------------------------------------------------------------


def compose_spec_validator() -> jsonschema.protocols.Validator:
    """The official compose-spec schema, as vendored by the pinned check-jsonschema."""
    source = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(source.read_text())
    assert schema.get("title") == "Compose Specification", "not the compose-spec schema"
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_errors(document: Mapping[str, Any]) -> list[str]:
    errors = compose_spec_validator().iter_errors(document)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]


def test_compose_file_validates_against_the_compose_spec_schema(compose: dict[str, Any]) -> None:
    assert schema_errors(compose) == []


def test_the_schema_rejects_what_compose_would_reject(compose: dict[str, Any]) -> None:
    broken = copy.deepcopy(compose)
    broken["services"]["postgres"]["healthcheck"]["test"] = {"cmd": "pg_isready"}
    broken["services"]["postgres"]["restart_policy"] = "always"
    errors = schema_errors(broken)
    assert any("services/postgres/healthcheck/test" in e for e in errors), errors
    assert any("restart_policy" in e for e in errors), errors


def test_interpolation_uses_defaults_and_refuses_unset_variables() -> None:
    assert interpolate("a:${X:-1}:${Y-2}:$$HOME:${Z:+3}", {"Z": "z"}) == "a:1:2:$HOME:3"
    assert interpolate("${X:-d}/${Y-d}", {"X": "", "Y": ""}) == "d/"
    with pytest.raises(ValueError, match="variable X has no default"):
        interpolate("${X}", {})
    with pytest.raises(ValueError, match="variable X has no default"):
        interpolate("${X:?set X}", {})


# --- versions ------------------------------------------------------------------------------------


def test_spark_images_are_the_pyspark_version(
    compose: dict[str, Any], pins: dict[str, str]
) -> None:
    pyspark = pins["pyspark"]
    assert pins.get("pyspark-client", pyspark) == pyspark
    repository, tag = base_image(SPARK_DOCKERFILE)
    assert repository == "apache/spark"
    assert tag.split("-")[0] == pyspark, f"{SPARK_DOCKERFILE}: Spark {tag} but pyspark=={pyspark}"
    assert "java17" in tag.split("-"), f"Spark image {tag} is not the Java 17 build"
    for role, service in spark_services(compose).items():
        assert image_tag(service["image"]) == pyspark, f"spark {role}: {service['image']}"
        assert service["build"]["dockerfile"] == str(SPARK_DOCKERFILE.relative_to(REPO))


def test_airflow_image_is_the_pinned_airflow(compose: dict[str, Any], pins: dict[str, str]) -> None:
    repository, tag = base_image(AIRFLOW_DOCKERFILE)
    assert repository == "apache/airflow"
    assert tag.split("-")[0] == pins["apache-airflow"]
    services = airflow_services(compose)
    assert set(services) == {*AIRFLOW_ROLES, "init"}
    images = {(s["image"], s["build"]["dockerfile"]) for s in services.values()}
    assert len(images) == 1, f"Airflow services use different images: {images}"
    image, dockerfile = images.pop()
    assert image_tag(image) == pins["apache-airflow"]
    assert dockerfile == str(AIRFLOW_DOCKERFILE.relative_to(REPO))


def test_dockerfile_base_images_are_pinned(compose: dict[str, Any]) -> None:
    for path in (AIRFLOW_DOCKERFILE, SPARK_DOCKERFILE):
        _, tag = base_image(path)
        assert tag != "latest" and re.match(r"^\d+\.\d+\.\d+", tag), f"{path}: FROM tag {tag}"
    for name, service in compose["services"].items():
        tag = image_tag(service["image"])
        # A version, or a dated release (MinIO: RELEASE.2025-09-07T16-13-09Z).
        pinned = re.match(r"^(\d+|RELEASE\.\d{4}-\d{2}-\d{2}T)", tag)
        assert tag != "latest" and pinned, f"{name}: image {service['image']}"


def python_minor(tag: str) -> str:
    match = re.search(r"python(\d+\.\d+)", tag)
    assert match, f"no pythonX.Y in {tag}"
    return match[1]


def test_executor_python_matches_the_driver_python(compose: dict[str, Any]) -> None:
    """PySpark fails tasks whose worker Python minor version differs from the driver's.

    The driver runs in the Airflow image (its tag names the Python); apache/spark 4.1.1's own
    python3 is Ubuntu 22.04's 3.10, so the Spark image installs the driver's minor version and
    puts it first on PATH, and PYSPARK_PYTHON names that version for both sides.
    """
    driver = python_minor(base_image(AIRFLOW_DOCKERFILE)[1])
    executor = dockerfile_args(SPARK_DOCKERFILE)["PYTHON_VERSION"]
    assert executor == driver
    requires = SpecifierSet(
        re.search(r'requires-python = "([^"]+)"', (REPO / "pyproject.toml").read_text())[1]
    )
    assert requires.contains(f"{driver}.0"), f"Python {driver} not in requires-python {requires}"
    env = {
        args.split("=", 1)[0]: args.split("=", 1)[1].strip('"')
        for keyword, line in dockerfile_instructions(SPARK_DOCKERFILE)
        if keyword == "ENV"
        for args in line.split()
    }
    assert env["PATH"].startswith("${ICEFLOE_VENV}/bin:"), env["PATH"]
    assert env["PYSPARK_PYTHON"] == "python${PYTHON_VERSION}"
    for role, service in airflow_services(compose).items():
        assert environment(service)["PYSPARK_PYTHON"] == f"python{driver}", role


# --- the Dockerfiles install the repository's requirements ---------------------------------------


def copied_to(path: Path, source: str) -> str:
    """Where the Dockerfile puts the repository file `source`."""
    for sources, destination in copies(path):
        if source in sources:
            return destination if not destination.endswith("/") else destination + Path(source).name
    raise AssertionError(f"{path} does not COPY {source}")


def test_airflow_dockerfile_installs_requirements_and_java() -> None:
    runs = [
        args for keyword, args in dockerfile_instructions(AIRFLOW_DOCKERFILE) if keyword == "RUN"
    ]
    requirements = copied_to(AIRFLOW_DOCKERFILE, "requirements.txt")
    assert any(
        re.search(rf"pip install .*-r {re.escape(requirements)}(\s|$)", run) for run in runs
    ), f"no RUN installs {requirements}"
    assert any('"apache-airflow==${AIRFLOW_VERSION}"' in run for run in runs)
    assert any("openjdk-17-jre-headless" in run for run in runs)
    assert any(re.search(r"pip install .*--no-deps /opt/icefloe(\s|$)", run) for run in runs)


def run_executor_requirements(*packages: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(SPARK_EXECUTOR_REQUIREMENTS), str(REPO / "requirements.txt"), *packages],
        capture_output=True,
        text=True,
        check=False,
    )


def test_spark_dockerfile_installs_the_executor_pins(pins: dict[str, str]) -> None:
    requirements = copied_to(SPARK_DOCKERFILE, "requirements.txt")
    script = copied_to(SPARK_DOCKERFILE, str(SPARK_EXECUTOR_REQUIREMENTS.relative_to(REPO)))
    packages = dockerfile_args(SPARK_DOCKERFILE)["EXECUTOR_PACKAGES"].split()
    assert {canonicalize_name(p) for p in packages} >= EXECUTOR_IMPORTS
    result = run_executor_requirements(*packages)
    assert result.returncode == 0, result.stderr
    printed = dict(line.split("==") for line in result.stdout.split())
    assert {canonicalize_name(n): v for n, v in printed.items()} == {
        canonicalize_name(p): pins[canonicalize_name(p)] for p in packages
    }
    # The image runs that script on the copied requirements.txt and installs what it prints.
    runs = " ".join(a for k, a in dockerfile_instructions(SPARK_DOCKERFILE) if k == "RUN")
    generated = re.search(
        rf"{re.escape(script)} {re.escape(requirements)} \$EXECUTOR_PACKAGES\s+>\s+(\S+);", runs
    )
    assert generated, f"{SPARK_DOCKERFILE} does not run {script} on {requirements}"
    assert re.search(rf'/bin/pip" install --no-cache-dir -r {re.escape(generated[1])};', runs)


def test_executor_packages_cover_what_the_tasks_import() -> None:
    """Every distribution the tasks' modules import is an executor package or installed with
    one (a missing one fails every task of a job on the cluster, not in local mode)."""
    script = (
        "import importlib, json, sys, importlib.metadata as md\n"
        f"for m in {list(TASK_MODULES)!r}: importlib.import_module(m)\n"
        "dists = md.packages_distributions()\n"
        "tops = {n.split('.')[0] for n in sys.modules}\n"
        "print(json.dumps(sorted({d for t in tops for d in dists.get(t, [])})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    imported = {canonicalize_name(d) for d in json.loads(done.stdout)}
    packages = dockerfile_args(SPARK_DOCKERFILE)["EXECUTOR_PACKAGES"].split()
    installed = _with_dependencies({canonicalize_name(p) for p in packages})
    assert imported - installed - _SPARK_PROVIDES == set()


def _with_dependencies(names: set[str]) -> set[str]:
    """`names` and every distribution they require (extras aside), as installed here."""
    from importlib.metadata import PackageNotFoundError, requires  # noqa: PLC0415

    from packaging.requirements import Requirement  # noqa: PLC0415

    found, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            wanted = requires(name) or []
        except PackageNotFoundError:
            continue
        for line in wanted:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return found


def test_executor_requirements_refuse_an_unpinned_package() -> None:
    result = run_executor_requirements("pyarrow", "no-such-package")
    assert result.returncode == 1
    assert "no-such-package has no '==' pin" in result.stderr


def context_files(source: str) -> Iterator[str]:
    path = REPO / source
    if path.is_file():
        yield source
        return
    for file in sorted(path.rglob("*")):
        if file.is_file() and "__pycache__" not in file.parts:
            yield str(file.relative_to(REPO))


@pytest.mark.parametrize(
    "dockerfile", [AIRFLOW_DOCKERFILE, SPARK_DOCKERFILE], ids=["airflow", "spark"]
)
def test_build_context_holds_what_each_dockerfile_copies(dockerfile: Path) -> None:
    ignore_file = dockerfile.with_name("Dockerfile.dockerignore")
    patterns = [
        line.strip()
        for line in ignore_file.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ignored(".venv/bin/python", patterns), f"{ignore_file} sends .venv/ to the builder"
    for sources, _ in copies(dockerfile):
        for source in sources:
            assert (REPO / source).exists(), f"{dockerfile}: COPY {source} does not exist"
            files = list(context_files(source))
            assert files, f"{dockerfile}: COPY {source} is empty"
            excluded = [f for f in files if ignored(f, patterns)]
            assert excluded == [], f"{ignore_file} excludes {excluded[:5]}"


# --- services, mounts and connections ------------------------------------------------------------


def test_airflow_services_share_image_and_secrets(compose: dict[str, Any]) -> None:
    services = airflow_services(compose)
    envs = {role: environment(service) for role, service in services.items()}
    for key in SHARED_AIRFLOW_ENV:
        values = {role: env.get(key) for role, env in envs.items()}
        assert None not in values.values() and "" not in values.values(), f"{key}: {values}"
        assert len(set(values.values())) == 1, f"{key} differs between services: {values}"
    env = envs["api-server"]
    Fernet(env["AIRFLOW__CORE__FERNET_KEY"])  # a usable key, not just a non-empty string
    api = services["api-server"]
    published = {str(p).rsplit(":", 1)[-1] for p in api["ports"]}
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == (
        f"http://{api['name']}:{published.pop()}/execution/"
    )
    metadata = make_url(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    postgres = environment(compose["services"][metadata.host])
    assert (metadata.username, metadata.password, metadata.database) == (
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_PASSWORD"],
        postgres["POSTGRES_DB"],
    )


def airflow_options() -> set[tuple[str, str]]:
    """(section, option) pairs of Airflow's own config reference, read without importing
    Airflow (its import configures a whole installation), and of icefloe's provider info
    (`[icefloe] state_uri`), which Airflow adds to its configuration."""
    spec = importlib.util.find_spec("airflow")
    assert spec is not None and spec.submodule_search_locations, "apache-airflow is not installed"
    reference = Path(next(iter(spec.submodule_search_locations))) / "config_templates/config.yml"
    sections = {**yaml.safe_load(reference.read_text()), **get_provider_info()["config"]}
    return {(section, option) for section, body in sections.items() for option in body["options"]}


def test_airflow_settings_name_options_airflow_knows(compose: dict[str, Any]) -> None:
    """A misspelt AIRFLOW__SECTION__KEY is silently ignored by Airflow; catch it here."""
    known = airflow_options()
    for role, service in airflow_services(compose).items():
        for key in environment(service):
            if key.startswith("AIRFLOW__"):
                section, _, option = key.removeprefix("AIRFLOW__").lower().partition("__")
                assert (section, option) in known, f"{role}: {key} is no Airflow option"


def test_bind_mounts_exist_and_volumes_are_declared(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in compose["services"].items():
        for source, target in mounts(service):
            if is_bind(source):
                assert (REPO / source).exists(), f"{name}: {source} is not in the repository"
            else:
                assert source in declared, f"{name}: volume {source} for {target} not declared"


def test_dags_and_plugins_mounts_are_the_configured_folders(compose: dict[str, Any]) -> None:
    for role, service in airflow_services(compose).items():
        by_target = {target: source for source, target in mounts(service)}
        env = environment(service)
        for folder, setting in (("dags", "DAGS_FOLDER"), ("plugins", "PLUGINS_FOLDER")):
            source = by_target.get(env[f"AIRFLOW__CORE__{setting}"])
            assert source is not None, f"{role}: nothing mounted at {setting}"
            assert (REPO / source).resolve() == REPO / folder, f"{role}: {source}"
            assert (REPO / folder).is_dir(), f"{folder}/ is missing from the repository"


def test_warehouse_is_a_bucket_of_the_compose_object_store(compose: dict[str, Any]) -> None:
    """Tables live on the S3-compatible `minio` service, reached with the connection's own
    properties (no Hadoop S3 connector anywhere); the init service creates the bucket."""
    extra = connection(airflow_services(compose)["scheduler"], "iceberg_default")["extra"]
    assert extra["warehouse"].startswith("s3://")
    properties = extra["properties"]
    endpoint = urlsplit(properties["s3.endpoint"])
    store = compose["services"][endpoint.hostname]
    assert str(endpoint.port) in " ".join(command_list(store)) or endpoint.port == 9000
    store_env = environment(store)
    assert properties["s3.access-key-id"] == store_env["MINIO_ROOT_USER"]
    assert properties["s3.secret-access-key"] == store_env["MINIO_ROOT_PASSWORD"]
    assert properties["s3.path-style-access"] == "true"
    init = airflow_services(compose)["init"]
    assert depends_on(init).get(endpoint.hostname) == "service_healthy"
    assert "create_bucket" in " ".join(command_list(init))
    for service in [*airflow_services(compose).values(), *spark_services(compose).values()]:
        assert "hadoop-aws" not in json.dumps(service), service["name"]


def test_iceberg_connection_names_the_catalog_database(compose: dict[str, Any]) -> None:
    conn = connection(airflow_services(compose)["scheduler"], "iceberg_default")
    assert conn["conn_type"] == "icefloe"
    extra = conn["extra"]
    assert set(extra) == ICEBERG_EXTRAS, f"extras must be exactly {ICEBERG_EXTRAS}: {extra}"
    assert extra["catalog_name"]
    uri = make_url(extra["uri"])
    assert uri.drivername == "postgresql+psycopg2"
    postgres = environment(compose["services"][uri.host])
    assert (uri.username, uri.password, uri.database) == (
        postgres["ICEBERG_DB_USER"],
        postgres["ICEBERG_DB_PASSWORD"],
        postgres["ICEBERG_DB"],
    )
    assert uri.database != postgres["POSTGRES_DB"], "the catalog shares Airflow's database"
    assert uri.port in (None, 5432)


def test_state_store_is_a_database_of_its_own(compose: dict[str, Any]) -> None:
    """icefloe's locks and run history: PostgreSQL on the stack's server, in neither Airflow's
    nor the catalog's database, created by the init service (as the server's superuser)
    before anything else runs, on every start."""
    services = airflow_services(compose)
    env = environment(services["scheduler"])
    state = make_url(env[STATE_URI_ENV])
    catalog = make_url(connection(services["scheduler"], "iceberg_default")["extra"]["uri"])
    metadata = make_url(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    assert state.drivername == "postgresql+psycopg2"
    assert (state.host, state.port) == (catalog.host, catalog.port)
    assert state.database not in (catalog.database, metadata.database)
    assert state.username not in (catalog.username, metadata.username)
    postgres = environment(compose["services"][state.host])
    init = services["init"]
    admin = make_url(environment(init)[ADMIN_URI_ENV])
    assert (admin.username, admin.password) == (
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_PASSWORD"],
    )  # the superuser the image creates: it may create roles and databases
    assert depends_on(init).get(state.host) == "service_healthy"
    command = " ".join(command_list(init))
    ensure = command.find("python -m icefloe_airflow.state_db ensure-database")
    assert 0 <= ensure < command.index("airflow db migrate"), command


def test_state_store_database_is_created_as_the_init_service_does(compose: dict[str, Any]) -> None:
    """Runs the init service's command for the state store against the local PostgreSQL
    server, with the compose file's names made unique, twice (every start runs it), then
    records a run in the store as the role it created."""
    if reason := postgres_unavailable():
        pytest.skip(reason)
    services = airflow_services(compose)
    state = make_url(environment(services["scheduler"])[STATE_URI_ENV])
    suffix = uuid.uuid4().hex[:10]
    admin = make_url(POSTGRES_URI)
    uri = admin.set(
        username=f"{state.username}_{suffix}",
        password=f"pw-{suffix}",
        database=f"{state.database}_{suffix}",
    ).render_as_string(hide_password=False)
    env = {**os.environ, STATE_URI_ENV: uri, ADMIN_URI_ENV: POSTGRES_URI}
    command = [sys.executable, "-m", "icefloe_airflow.state_db", "ensure-database"]
    admin_engine = create_engine(POSTGRES_URI, isolation_level="AUTOCOMMIT")
    try:
        outputs = []
        for _ in range(2):
            result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            assert result.returncode == 0, result.stderr
            outputs.append(result.stdout)
        assert "database" in outputs[0] and "created" in outputs[0]
        assert outputs[1].strip().endswith(": ok")
        assert f"pw-{suffix}" not in "".join(outputs)
        # Its tables are created as that role: it owns the database (PostgreSQL 15 on lets
        # only the owner create in `public`).
        store = MaintenanceStore.open(uri, "compose")
        try:
            ids = {"dag_id": "d", "run_id": "r", "task_id": "t", "try_number": 1}
            run = store.start_run("db.t", "ingest", **ids)
            store.finish_run(run, state="success")
            assert store.last_runs("db.t")["ingest"].state == "success"
        finally:
            store.close()
    finally:
        with admin_engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{make_url(uri).database}" WITH (FORCE)'))
            conn.execute(text(f'DROP ROLE IF EXISTS "{make_url(uri).username}"'))
        admin_engine.dispose()


def init_script(compose: Mapping[str, Any]) -> tuple[Path, dict[str, str]]:
    """The postgres service's first-start script (in the repository) and its environment."""
    service = compose["services"]["postgres"]
    scripts = [
        REPO / source
        for source, target in mounts(service)
        if target.startswith("/docker-entrypoint-initdb.d/") and target.endswith(".sh")
    ]
    assert len(scripts) == 1, f"postgres: expected one init script, got {scripts}"
    assert os.access(scripts[0], os.X_OK), f"{scripts[0]} must be executable"
    return scripts[0], environment(service)


def test_postgres_init_script_creates_a_working_catalog_database(compose: dict[str, Any]) -> None:
    """Runs the real init script against the local PostgreSQL server, with the compose file's
    names made unique, then commits through an icecore catalog as the role it created."""
    if shutil.which("psql") is None:
        pytest.skip("psql is not installed")
    if reason := postgres_unavailable():
        pytest.skip(reason)
    script, service_env = init_script(compose)
    suffix = uuid.uuid4().hex[:10]
    admin = make_url(POSTGRES_URI)
    names = {key: f"{service_env[key]}_{suffix}" for key in ("ICEBERG_DB", "ICEBERG_DB_USER")}
    env = {
        **os.environ,
        **names,
        "ICEBERG_DB_PASSWORD": service_env["ICEBERG_DB_PASSWORD"],
        "POSTGRES_USER": admin.username or "postgres",
        "POSTGRES_DB": admin.database or "postgres",
        "PGHOST": admin.host or "127.0.0.1",
        "PGPORT": str(admin.port or 5432),
    }
    admin_engine = create_engine(POSTGRES_URI, isolation_level="AUTOCOMMIT")
    try:
        result = subprocess.run(
            ["bash", str(script)], env=env, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr
        uri = admin.set(
            username=names["ICEBERG_DB_USER"],
            password=service_env["ICEBERG_DB_PASSWORD"],
            database=names["ICEBERG_DB"],
        )
        catalog = SqlCatalog("compose", uri.render_as_string(hide_password=False), "/warehouse")
        try:
            catalog.create_namespace("maintenance")
            assert catalog.list_namespaces() == [("maintenance",)]
        finally:
            catalog.close()
        with admin_engine.connect() as conn:
            owner = conn.execute(
                text("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = :d"),
                {"d": names["ICEBERG_DB"]},
            ).scalar_one()
        assert owner == names["ICEBERG_DB_USER"]
    finally:
        with admin_engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{names["ICEBERG_DB"]}" WITH (FORCE)'))
            conn.execute(text(f'DROP ROLE IF EXISTS "{names["ICEBERG_DB_USER"]}"'))
        admin_engine.dispose()


def test_spark_connection_names_the_master(compose: dict[str, Any]) -> None:
    conn = connection(airflow_services(compose)["scheduler"], "spark_default")
    assert conn["conn_type"] == "spark"
    spark = spark_services(compose)
    assert set(spark) == {"master", "worker", "connect"}
    master_command = command_list(spark["master"])
    master_host = option(master_command, "--host")
    assert master_host in (spark["master"]["name"], spark["master"].get("hostname"))
    master_url = f"spark://{master_host}:{option(master_command, '--port')}"
    # SparkSubmitHook: a spark connection whose host holds "://" is the master URL, plus :port.
    assert f"{conn['host']}:{conn['port']}" == master_url
    assert master_url in command_list(spark["worker"]), "the worker joins another master"
    assert conn.get("extra", {}).get("deploy-mode", "client") == "client"


def test_spark_connect_server_runs_on_the_cluster_and_its_connection_reaches_it(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Spark Connect service is spark-submitted on the Spark image to the standalone
    master, reachable by executors at its hostname, leaving the workers cores for
    spark-submit applications; `spark_connect_default` is the URL the Spark provider's hook
    builds for it, which the jobs take as their Spark Connect server."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook  # noqa: PLC0415

    from spark_jobs.common.cli import split_remote  # noqa: PLC0415

    spark = spark_services(compose)
    server, master = spark["connect"], spark["master"]
    assert (server["image"], server["build"]) == (master["image"], master["build"])
    command = command_list(server)
    assert command[0] == "/opt/spark/bin/spark-submit" and command[-1] == "spark-internal"
    master_command = command_list(master)
    master_url = f"spark://{option(master_command, '--host')}:{option(master_command, '--port')}"
    assert option(command, "--master") == master_url
    conf = spark_conf(command)
    assert conf["spark.driver.host"] == server["hostname"]
    port = int(conf["spark.connect.grpc.binding.port"])
    assert f"{port}" in [p.rsplit(":", 1)[-1] for p in server["ports"]]
    worker_cores = int(option(command_list(spark["worker"]), "--cores"))
    assert 0 < int(conf["spark.cores.max"]) < worker_cores, "spark-submit applications get none"
    assert "exec 3<>/dev/tcp/127.0.0.1/" + str(port) in " ".join(server["healthcheck"]["test"])

    scheduler = airflow_services(compose)["scheduler"]
    value = environment(scheduler)["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"]
    assert connection(scheduler, "spark_connect_default")["conn_type"] == "spark_connect"
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", value)
    url = SparkConnectHook("spark_connect_default").get_connection_url()
    assert url == f"sc://{server['hostname']}:{port}/"
    assert split_remote(["--remote", url, "--table", "db.t"]) == (url, ["--table", "db.t"])
    # Every job operator runs on that server by default there; "" still spark-submits.
    from icefloe_airflow.operators import IcefloeJobOperator  # noqa: PLC0415

    default = environment(scheduler)["AIRFLOW__ICEFLOE__SPARK_CONNECT_CONN_ID"]
    monkeypatch.setenv("AIRFLOW__ICEFLOE__SPARK_CONNECT_CONN_ID", default)
    job = IcefloeJobOperator(job="rewrite_data_files", table="db.t", task_id="compact")
    assert job.spark_connect_conn_id == "spark_connect_default"
    submitted = IcefloeJobOperator(
        job="rewrite_data_files", table="db.t", task_id="submit", spark_connect_conn_id=""
    )
    assert submitted.spark_connect_conn_id is None


def test_depends_on_refers_to_defined_services_and_can_start(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        for dep, condition in depends_on(service).items():
            assert dep in services, f"{name} depends on undefined service {dep}"
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep}'s healthcheck"
            if condition == "service_completed_successfully":
                assert services[dep].get("restart", "no") == "no", f"{dep} never completes"
    # No cycle: every service can be started after its dependencies.
    started: set[str] = set()
    while len(started) < len(services):
        ready = {
            n for n, s in services.items() if n not in started and set(depends_on(s)) <= started
        }
        assert ready, f"dependency cycle among {sorted(set(services) - started)}"
        started |= ready


def test_long_running_services_have_healthchecks(compose: dict[str, Any]) -> None:
    init = airflow_services(compose)["init"]["name"]
    for name, service in compose["services"].items():
        if name != init:
            assert "test" in service.get("healthcheck", {}), f"{name} has no healthcheck"
    for role in AIRFLOW_ROLES:
        service = airflow_services(compose)[role]
        assert depends_on(service).get(init) == "service_completed_successfully", role
