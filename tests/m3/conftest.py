"""Make the M3 test helpers (``m3_harness``) importable; run the DuckDB property tests on both backends."""

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


@pytest.fixture(autouse=True)
def m3_backend(request):
    """The backend ``m3_harness.Harness.run`` uses for this test (python unless parametrised)."""
    import m3_harness

    backend = getattr(request, "param", "python")
    m3_harness.BACKEND = backend
    yield backend
    m3_harness.BACKEND = "python"
