"""Make the M3 test helpers (``m3_harness``) importable; run the DuckDB property tests on both backends.

``make test`` runs every shape on both backends.  ``make test-fast`` runs each quick-tier shape on one
backend, alternating (:func:`pytest_collection_modifyitems`), so every module's quick shapes still meet
DuckDB on the Python and on the native backend, at half the cost.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

#: The tests every backend must pass: each query shape against DuckDB after every batch.
BOTH_BACKENDS = ("test_view_matches_duckdb",)


def pytest_generate_tests(metafunc):
    if "m3_backend" in metafunc.fixturenames and metafunc.function.__name__ in BOTH_BACKENDS \
            and metafunc.module.__name__.endswith("_vs_duckdb"):
        metafunc.parametrize("m3_backend", ["python", "native"], indirect=True)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks
def pytest_collection_modifyitems(config, items):
    """Of a quick-tier shape's two backends (a DuckDB module's test parametrised on both), one is marked ``slow``: the Python backend stays for a module's
    1st, 3rd, ... quick shape (sorted), the native one for its 2nd, 4th, ...  A shape already marked ``slow``
    keeps both for ``make test``."""
    both = [item for item in items if "m3_backend" in getattr(getattr(item, "callspec", None), "params", {})
            and (getattr(item, "originalname", None) in BOTH_BACKENDS or item.path.stem.endswith("_vs_duckdb"))]
    quick: dict = {}  # (module, function) -> the ids of its quick shapes
    for item in both:
        if item.get_closest_marker("slow") is None:
            quick.setdefault((item.path, item.originalname), set()).add(_shape_id(item))
    for item in both:
        shapes = sorted(quick.get((item.path, item.originalname), ()))
        shape = _shape_id(item)
        if shape in shapes and item.callspec.params["m3_backend"] != ("python", "native")[shapes.index(shape) % 2]:
            item.add_marker(pytest.mark.slow)


def _shape_id(item) -> str:
    """The test's parameters but the backend (``python-tpch_q10`` -> ``tpch_q10``)."""
    return repr(sorted((k, repr(v)) for k, v in item.callspec.params.items() if k != "m3_backend"))


@pytest.fixture(autouse=True)
def m3_backend(request):
    """The backend ``m3_harness.Harness.run`` uses for this test (python unless parametrised)."""
    import m3_harness

    backend = getattr(request, "param", "python")
    m3_harness.BACKEND = backend
    yield backend
    m3_harness.BACKEND = "python"
