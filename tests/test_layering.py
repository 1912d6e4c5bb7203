"""The dependency rule: dags -> plugins -> icecore; spark_jobs -> icecore; icecore imports
neither Spark nor Airflow. Checked on every import statement, including those inside
functions, so a convenience import across a layer fails here rather than on a cluster where
the other layer is not installed (Airflow workers have no pyspark; executors no Airflow)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "icecore": {"pyspark", "airflow", "spark_jobs", "icefloe_airflow"},
    "spark_jobs": {"airflow", "icefloe_airflow"},
    "plugins": {"pyspark", "spark_jobs"},
    "dags": {"pyspark", "spark_jobs"},
}
# The operators ship icecore and spark_jobs to the cluster as a zip, built by the one module
# that knows what goes in it. It imports nothing beyond the standard library, so an Airflow
# worker needs neither Spark nor the jobs' dependencies.
ALLOWED = {("plugins", "spark_jobs.common.packaging")}
ALLOWED_LAYERS = {"dags": "plugins"}  # DAG files may use what plugins may


def allowed(layer: str, module: str) -> bool:
    layer = ALLOWED_LAYERS.get(layer, layer)
    return any(
        layer == where and (module == prefix or module.startswith(prefix + "."))
        for where, prefix in ALLOWED
    )


def imported_modules(path: Path) -> set[str]:
    """Every module the file imports absolutely."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files, f"no Python files under {layer}/"
    crossings = {
        str(path.relative_to(ROOT)): sorted(
            module
            for module in imported_modules(path)
            if module.split(".")[0] in FORBIDDEN[layer] and not allowed(layer, module)
        )
        for path in files
    }
    assert {path: found for path, found in crossings.items() if found} == {}


# Imported in a fresh interpreter where these packages cannot be imported at all: what an
# Airflow worker (no Spark) and an executor (no Airflow) are, so an import made indirectly, by
# a third-party module or at run time, fails too.
_IMPORT_EVERY_MODULE = textwrap.dedent(
    """
    import importlib, pkgutil, sys

    class Blocked:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in set(sys.argv[2].split(",")):
                raise ImportError(f"{name} may not be imported here")
            return None

    sys.meta_path.insert(0, Blocked())
    package = importlib.import_module(sys.argv[1])
    for found in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(found.name)
    print(sorted(m for m in sys.modules if m.startswith(package.__name__ + ".")))
    """
)


# Engine-neutral code that lived in spark_jobs once: planners, what they plan from, the task
# code Spark tasks and the driver's threads run alike, the one conflict-retry loop, and the
# jobs' declarations (options, results, command lines) that the Airflow side reads too.
MOVED_FROM_THE_JOBS = {
    "icecore.actions.batch_ids",
    "icecore.actions.other_tables",
    "icecore.actions.referenced_files",
    "icecore.actions.table_setup",
    "icecore.actions.committing",
    "icecore.actions.live_files",
    "icecore.actions.manifests_in_threads",
    "icecore.actions.rewrite_data_files",
    "icecore.actions.rewrite_position_deletes",
    "icecore.actions.run_files",
    "icecore.data.bin_rewrite",
    "icecore.data.bucket_hash",
    "icecore.data.dv_files",
    "icecore.data.equality_conversion",
    "icecore.data.live_batches",
    "icecore.data.metrics",
    "icecore.data.parquet_writer",
    "icecore.data.partition_texts",
    "icecore.data.task_reports",
    "icecore.jobs.argv",
    "icecore.jobs.attempts",
    "icecore.jobs.errors",
    "icecore.jobs.jobs",
    "icecore.jobs.progress",
    "icecore.jobs.results",
    "icecore.jobs.where",
}


def test_icecore_imports_without_spark_or_airflow() -> None:
    """Every icecore module, the engine-neutral planners and readers moved out of the jobs
    included, imports with neither Spark (nor its pandas UDF machinery) nor Airflow."""
    blocked = ",".join(sorted(FORBIDDEN["icecore"]))
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_EVERY_MODULE, "icecore", blocked],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    imported = set(ast.literal_eval(done.stdout.strip().splitlines()[-1]))
    assert MOVED_FROM_THE_JOBS - imported == set()


def test_the_import_check_refuses_a_blocked_package() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_EVERY_MODULE, "spark_jobs", "pyspark"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (
        done.returncode != 0 and "pyspark" in done.stderr and "may not be imported" in done.stderr
    )


def test_a_crossing_is_seen_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    from spark_jobs.demo import x  # noqa\n    import pyspark.sql\n"
    )
    assert imported_modules(module) == {"spark_jobs.demo", "pyspark.sql"}


# icecore modules that are standard library only, importing nothing else of icecore (and
# whose package `__init__`s import nothing): the allowed crossing may use them, since they
# bring no dependency either. The rule of durations is one of them (`icecore.durations`),
# shared by the jobs' declarations and icecore's table properties.
STANDARD_LIBRARY_ONLY = {"icecore.durations"}


def test_the_allowed_crossing_imports_only_the_standard_library() -> None:
    for _, module in ALLOWED:
        base = ROOT / module.replace(".", "/")
        paths = sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
        assert paths, module
        for path in paths:
            outside = {
                m
                for m in imported_modules(path)
                if not (m == module or m.startswith(module + "."))
                and m not in STANDARD_LIBRARY_ONLY
            }
            packages = {m.split(".")[0] for m in outside}
            assert packages <= set(sys.stdlib_module_names), (path, packages)


def test_the_standard_library_only_icecore_modules_are() -> None:
    for module in sorted(STANDARD_LIBRARY_ONLY):
        path = ROOT / (module.replace(".", "/") + ".py")
        packages = {m.split(".")[0] for m in imported_modules(path)}
        assert packages <= set(sys.stdlib_module_names), (path, packages)
        parts = module.split(".")
        for depth in range(1, len(parts)):
            init = ROOT.joinpath(*parts[:depth], "__init__.py")
            assert imported_modules(init) <= {"__future__"}, init


# The `icefloe` command and the fleet engine it shares with the fleet DAG run where Airflow is
# not installed (a laptop, a cron job): no module of theirs imports Airflow, at the top or
# inside a function (the command imports lazily), nor does anything they import at the top.
# (Shared plugin modules may ask Airflow's settings in a function the DAG side calls, e.g.
# `tables_config.default_config_path`; the command names its files itself, and
# tests/test_fleet_cli.py runs it with Airflow's import checked.)
AIRFLOW_FREE = ("icefloe_airflow.command", "icefloe_airflow.fleet")


def test_the_command_and_the_fleet_engine_import_no_airflow() -> None:
    for package in AIRFLOW_FREE:
        files = sorted((ROOT / "plugins" / package.replace(".", "/")).glob("*.py"))
        assert len(files) > 4, package
        crossings = {
            str(path.relative_to(ROOT)): sorted(
                m for m in imported_modules(path) if m.split(".")[0] == "airflow"
            )
            for path in files
        }
        assert {path: found for path, found in crossings.items() if found} == {}
        done = subprocess.run(
            [sys.executable, "-c", _IMPORT_EVERY_MODULE, package, "airflow"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        imported = set(ast.literal_eval(done.stdout.strip().splitlines()[-1]))
        assert {f"{package}.{path.stem}" for path in files} - imported == {f"{package}.__init__"}


# Import cycles -------------------------------------------------------------------------------
# Among our packages, no module may import (at run time, at any depth, in a function too) a
# module that imports it back: a cycle makes import order matter and hides which module owns
# the shared piece. Imports under `if TYPE_CHECKING:` run for the type checker only.
PACKAGES = {
    "icecore": ROOT / "icecore",
    "spark_jobs": ROOT / "spark_jobs",
    "icefloe_airflow": ROOT / "plugins" / "icefloe_airflow",
}


def package_modules(packages: dict[str, Path]) -> dict[str, Path]:
    """Every module of `packages` by dotted name (a package by its `__init__`)."""
    found: dict[str, Path] = {}
    for name, base in packages.items():
        for path in base.rglob("*.py"):
            parts = [name, *path.relative_to(base).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(path: Path) -> set[tuple[str, str]]:
    """What the file may import when it runs, as (module, name): `import a.b` is ("a.b", ""),
    `from a import b` is ("a", "b"). Blocks under `if TYPE_CHECKING:` are left out."""
    found: set[tuple[str, str]] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for statement in child.orelse:
                    visit_one(statement)
            else:
                visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.update((node.module, alias.name) for alias in node.names)
        visit(node)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's run-time imports among `modules`: `from a import b` is an edge to the
    module `a.b` if there is one, else to `a` (`from icecore.io import FileIO` runs the
    package `icecore.io`); a dotted name not ours resolves to its longest prefix that is."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges = set()
        for imported, name in runtime_imports(path):
            target = f"{imported}.{name}" if f"{imported}.{name}" in modules else imported
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module:
                edges.add(target)
        graph[module] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(cycles)


def test_no_import_cycles_among_our_modules() -> None:
    modules = package_modules(PACKAGES)
    assert "icecore.io.fileio" in modules and "icefloe_airflow.results" in modules
    cycles = import_cycles(import_graph(modules))
    assert cycles == []


# spark_jobs is the Spark side only: every module of it runs Spark, directly or through what it
# imports, but for its packages' docstrings and the zip the jobs are shipped in (which the
# operators build too). Engine-neutral code goes to icecore, where a driver can use it.
SPARK_FREE_JOBS_MODULES = {"spark_jobs.common.packaging"}


def test_every_spark_jobs_module_needs_spark() -> None:
    modules = package_modules({"spark_jobs": PACKAGES["spark_jobs"]})
    graph = import_graph(modules)
    needs = {
        module
        for module, path in modules.items()
        if any(imported.split(".")[0] == "pyspark" for imported, _ in runtime_imports(path))
    }
    while grown := {m for m, edges in graph.items() if m not in needs and edges & needs}:
        needs |= grown
    packages = {m for m, path in modules.items() if path.name == "__init__.py"}
    assert set(modules) - needs - packages == SPARK_FREE_JOBS_MODULES


def test_the_cycle_check_sees_runtime_edges_only(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.a import A\n")
    (package / "a.py").write_text("from pkg import b\nA = 1\n")
    (package / "b.py").write_text("def f():\n    from pkg.c import C  # noqa\n    return C\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n"
        "else:\n    import pkg.d\nC = 2\n"
    )
    (package / "d.py").write_text("from pkg.b import f\n")
    graph = import_graph(package_modules({"pkg": package}))
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.c"},
        "pkg.c": {"pkg.d"},
        "pkg.d": {"pkg.b"},
    }
    assert import_cycles(graph) == [["pkg.b", "pkg.c", "pkg.d"]]
