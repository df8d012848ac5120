"""Benchmarks are not part of the default test run: `python -m pytest benchmarks/` runs them,
`python benchmarks/gate.py` runs them and checks the ratios."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
