"""Spark's own JSON schema inference over a frame of JSON lines, on classic Spark and over
Spark Connect.

    schema = infer_json_schema(lines, {"mode": "FAILFAST", ...})  # lines: one string column

Spark infers a JSON schema from a dataset of strings (`DataFrameReader.json(Dataset[String])`
in Scala). PySpark exposes that only for an RDD, which a Spark Connect client does not have;
Spark Connect's protocol has the same operation as a relation of its own (`Parse`, Spark 3.5+,
what the Scala Connect client sends), which PySpark's Connect client does not build. So: the
RDD on classic Spark, the `Parse` relation, built here, over Connect. Both run the same
inference on the server with the same options.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from spark_jobs.common.connect import is_connect


def infer_json_schema(lines: DataFrame, options: Mapping[str, str]) -> T.StructType:
    """The schema Spark's JSON reader infers from the text of `lines`' only column."""
    spark = lines.sparkSession
    if not is_connect(spark):
        text = lines.rdd.map(lambda row: row[0])
        return spark.read.options(**options).json(text).schema
    return _parsed(lines, options).schema


def _parsed(lines: DataFrame, options: Mapping[str, str]) -> DataFrame:
    """`lines` parsed as JSON by a Connect `Parse` relation (schema inferred by the server)."""
    from pyspark.sql.connect import proto  # noqa: PLC0415 (Connect clients only)
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame  # noqa: PLC0415
    from pyspark.sql.connect.plan import LogicalPlan  # noqa: PLC0415

    class ParseJson(LogicalPlan):
        def plan(self, session):  # type: ignore[no-untyped-def]
            assert self._child is not None
            relation = self._create_proto_relation()
            relation.parse.input.CopyFrom(self._child.plan(session))
            relation.parse.format = proto.Parse.ParseFormat.PARSE_FORMAT_JSON
            relation.parse.options.update(dict(options))
            return relation

    return ConnectFrame(ParseJson(lines._plan), lines.sparkSession)  # type: ignore[attr-defined]
