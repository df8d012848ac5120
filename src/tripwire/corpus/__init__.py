"""``tripwire corpus``: validate thresholds against recorded sessions before trusting them.

- ``sessions``: the sessions of a path (one function every command reads them through);
- ``measure``: one pass per session through the guardrails in warn mode with the engine's
  statistics mode on: per signal, the peak of the quantity its threshold is compared with, and
  the first event at which it trips; files in parallel processes or on a Dask cluster;
- ``analysis``: distributions (numpy), the label gate (``validate``) and threshold sweeps;
- ``labels``: outcome label files; ``report``: the HTML page and its plots (matplotlib).
"""

from .measure import Measured, SessionResult, measure_paths

__all__ = ["Measured", "SessionResult", "measure_paths"]
