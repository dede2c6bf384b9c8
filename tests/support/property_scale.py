"""How many examples each property test draws, and the hypothesis settings they share.

Apart from ``support/topologies.py`` (the random-topology strategy): most of the
property tests that scale their examples draw no topology at all.

``BOREAS_PROPERTY_SCALE=20`` multiplies every example count (:func:`examples`)
for a deeper run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck

#: BOREAS_PROPERTY_SCALE=20 runs twenty times the examples (a deeper hunt than CI's); ``make test-fast``
#: sets 0.25 (a quarter, at least one: the inner loop still exercises every property).
SCALE = float(os.environ.get("BOREAS_PROPERTY_SCALE", "1"))


def examples(n: int) -> int:
    return max(1, round(n * SCALE))


SETTINGS = {"deadline": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much]}
