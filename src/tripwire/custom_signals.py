"""Deprecated path: moved to ``tripwire.signals.custom``, whose names this module forwards
(with a ``DeprecationWarning``) until the next release."""

from tripwire.base.lazy import moved

__getattr__, __dir__ = moved("tripwire.custom_signals", "tripwire.signals.custom")
