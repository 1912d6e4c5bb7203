"""The jobs' code uses only what a Spark Connect client has: no SparkContext, RDD, JVM gateway,
broadcast variable or accumulator (PySpark's Connect session raises on each). Checked on
every attribute and import in spark_jobs/, so a classic-only call fails here rather than on a
user's Connect server; the few classic-only branches are named below, each behind a check
that the session is classic (`is_connect`) or that spark-submit's gateway is there."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLASSIC_ONLY = {
    "SparkContext", "sparkContext", "_jvm", "_jsc", "_jdf", "_sc", "rdd", "parallelize",
    "broadcast", "accumulator", "newSession", "setLogLevel", "java_gateway", "launch_gateway",
}  # fmt: skip
# (file, function) -> why the classic-only use is fine there.
ALLOWED = {
    ("spark_jobs/common/session.py", "get_session"): "classic branch: setLogLevel",
    ("spark_jobs/common/session.py", "_yarn_cluster_driver"): "only under spark-submit's gateway",
    ("spark_jobs/common/session.py", "parallelism"): "classic branch",
    ("spark_jobs/common/session.py", "isolated_session"): "classic branch: newSession",
    ("spark_jobs/common/cli.py", "_say_cause"): "only under spark-submit's gateway",
    ("spark_jobs/ingest/json_schema.py", "infer_json_schema"): "classic branch: the RDD",
    ("spark_jobs/common/connect.py", "_connect_mode"): "refuses a classic SparkContext",
}


def _join_hint(node: ast.Attribute) -> bool:
    """`F.broadcast(frame)`: a join hint, which Connect has (not SparkContext.broadcast)."""
    return isinstance(node.value, ast.Name) and node.value.id in {"F", "functions"}


def _uses(path: Path) -> list[tuple[str, str, int]]:
    """(enclosing function, name, line) of each classic-only attribute or import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                else function
            )
            names: list[str] = []
            if isinstance(child, ast.Attribute) and not _join_hint(child):
                names = [child.attr]
            elif isinstance(child, ast.ImportFrom):
                names = [*(child.module or "").split("."), *(a.name for a in child.names)]
            elif isinstance(child, ast.Import):
                names = [part for a in child.names for part in a.name.split(".")]
            for name in names:
                if name in CLASSIC_ONLY:
                    found.append((function, name, child.lineno))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_jobs_touch_no_classic_only_api_outside_classic_branches() -> None:
    offending = []
    allowed_seen = set()
    for path in sorted((ROOT / "spark_jobs").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for function, name, line in _uses(path):
            if (relative, function) in ALLOWED:
                allowed_seen.add((relative, function))
            else:
                offending.append(f"{relative}:{line} {function}: {name}")
    assert offending == []
    assert allowed_seen == set(ALLOWED), "an allowance no code needs any more"


def test_the_check_sees_classic_only_calls(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from pyspark import SparkContext\n"
        "def f(spark):\n"
        "    spark.sparkContext.parallelize([1]).collect()\n"
        "    spark.sparkContext.broadcast(1)\n"
        "    F.broadcast(df)\n"
        "    return df.rdd.map(str)\n"
    )
    assert {name for _, name, _ in _uses(sample)} == {
        "SparkContext", "sparkContext", "parallelize", "broadcast", "rdd",
    }  # fmt: skip
