"""Cross-checks: compute a query with Spark SQL over the same data Boreas was fed.

Boreas maintains its results incrementally; Spark recomputes them from
scratch over the whole input.  Agreement between the two is the end-to-end
check used by ``make demo`` and, at scale, by the M3 views.

Usage::

    rows = verify("SELECT sensor, count(*) AS n FROM readings GROUP BY sensor",
                  {"readings": "readings.parquet"})
    # [{'sensor': 1, 'n': 600}, ...]

An ``m3`` box's ``sql`` parameter can be passed as it is: its ``CREATE
STREAM``/``CREATE TABLE`` declarations are dropped (the tables are the
relations' data, named like the relations) and ``CREATE VIEW v AS SELECT``
runs as the SELECT.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def verify(sql: str, tables: dict[str, "DataFrame | str | Path"], spark: "SparkSession | None" = None,
           ) -> list[dict[str, Any]]:
    """Run ``sql`` with Spark SQL; tables are DataFrames or parquet/CSV paths, registered by name."""
    from .session import local_session

    spark = spark or local_session()
    for name, table in tables.items():
        frame = table if not isinstance(table, (str, Path)) else _read(spark, Path(table))
        frame.createOrReplaceTempView(name)
    return [row.asDict() for row in spark.sql(query_of(sql)).collect()]


_DECLARATION = re.compile(r"^CREATE\s+(STREAM|TABLE)\b", re.IGNORECASE)
_VIEW = re.compile(r"^CREATE\s+VIEW\s+\w+\s+AS\s+", re.IGNORECASE)


def query_of(sql: str) -> str:
    """The one query in ``sql``, without M3's relation declarations.

    >>> query_of("CREATE STREAM r(a INT); CREATE VIEW v AS SELECT a FROM r;")
    'SELECT a FROM r'
    """
    statements = [s.strip() for s in sql.split(";") if s.strip()]
    queries = [_VIEW.sub("", s) for s in statements if not _DECLARATION.match(s)]
    if len(queries) != 1:
        raise ValueError(f"expected one query besides CREATE STREAM/TABLE declarations, found {len(queries)}")
    return queries[0]


def _read(spark: "SparkSession", path: Path) -> "DataFrame":
    if path.suffix == ".csv" or (path.is_dir() and any(path.glob("*.csv"))):
        return spark.read.option("header", True).option("inferSchema", True).csv(str(path))
    return spark.read.parquet(str(path))
