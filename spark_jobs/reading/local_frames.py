"""Small driver-side tables as Spark frames.

Small tables (file ids, pairs) are built as SQL `VALUES` (`local_frame`), a local relation
that Spark broadcasts from the driver; `createDataFrame` would make an RDD, and every
broadcast of it would be a Spark job of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


def local_frame(
    spark: SparkSession, rows: Sequence[Sequence[Any]], columns: Sequence[tuple[str, str]]
) -> DataFrame:
    """`rows` as a local relation with `columns` (name, Spark SQL type): str, int, None and
    lists of int values. Strings travel hex-encoded, so no path needs SQL escaping."""
    typed = [F.col(f"c{i}").cast(t).alias(n) for i, (n, t) in enumerate(columns)]
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    if rows:
        values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)
        query = f"SELECT * FROM VALUES {values} AS t({names})"
    else:
        nulls = ", ".join(f"CAST(NULL AS {t})" for _, t in columns)
        query = f"SELECT * FROM VALUES ({nulls}) AS t({names}) WHERE false"
    return spark.sql(query).select(*typed)


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return f"CAST(X'{value.encode('utf-8').hex()}' AS STRING)"
    if isinstance(value, bool):
        raise TypeError("local_frame: booleans are not supported")
    if isinstance(value, int):
        return f"{value}L"
    if isinstance(value, list | tuple):
        return "ARRAY(" + ", ".join(_literal(v) for v in value) + ")"
    raise TypeError(f"local_frame: unsupported value {value!r}")
