"""A local SparkSession that can run Boreas tasks.

Spark starts its Python workers with ``$PYSPARK_PYTHON`` or, when unset, the
first ``python3`` on the PATH -- often not the interpreter that has Boreas
installed, so every task would fail to import ``boreas``.  This helper
points the workers at the running interpreter (unless the caller chose one)
and keeps a local session quiet and small.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def local_session(master: str = "local[2,4]", app: str = "boreas", shuffle_partitions: int = 4,
                  log_level: str = "WARN") -> SparkSession:
    """The active SparkSession, or a new local one whose workers run this interpreter.

    The default ``local[2,4]`` runs two task threads and retries a failed
    task up to 3 times (plain ``local[N]`` never retries one, which would
    waste the exactly-once retries this package is built for).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
             .getOrCreate())
    spark.sparkContext.setLogLevel(log_level)
    return spark
