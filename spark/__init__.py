"""Spark drivers for Boreas: publish DataFrames, files and streaming queries into input streams.

Every Spark task sends its partition straight to the stream's entry nodes
over the wire protocol, under a producer id fixed by the driver and with
deterministic batches, so retried, speculative and replayed tasks deliver
each row exactly once (the nodes drop batches they already have).

* :func:`publish` -- a DataFrame or RDD;
* :func:`publish_file` -- a parquet or CSV file, typed by the stream's schema;
* :func:`stream_sink` -- ``writeStream.foreachBatch(stream_sink(...))``;
* :func:`local_session` -- a local SparkSession whose workers can import Boreas;
* :func:`verify` -- the same query computed by Spark SQL, for cross-checks;
* :func:`load_view` -- bulk-load a partitioned ``m3`` box's maps from tables (before streaming);
* :func:`verify_view` -- a view read from Boreas (merged over members) against Spark SQL or expected rows.

pyspark is imported only when a function needs it, so importing this
package does not require Spark.
"""

from .load import (
           LoadError,
           LoadPlan,
           LoadRefused,
           ViewCheck,
           load_view,
           plan_load,
           verify_view,
)
from .publish import (
           PublishResult,
           RefusedRow,
           RowsRefused,
           publish,
           publish_file,
           run_job,
)
from .session import local_session
from .streaming import stream_sink
from .target import StreamTarget, lookup_target
from .verify import verify

__all__ = ["LoadError", "LoadPlan", "LoadRefused", "PublishResult", "RefusedRow", "RowsRefused", "StreamTarget",
           "ViewCheck", "load_view", "local_session", "lookup_target", "plan_load", "publish", "publish_file",
           "run_job", "stream_sink", "verify", "verify_view"]
