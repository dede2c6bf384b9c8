"""Make the M3 test helpers (``m3_harness``) importable from the test modules."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
