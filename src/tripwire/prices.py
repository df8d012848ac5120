"""Deprecated path: moved to ``tripwire.interchange``, whose names this module forwards
(with a ``DeprecationWarning``) until the next release."""

from tripwire.base.lazy import moved

__getattr__, __dir__ = moved("tripwire.prices", "tripwire.interchange")
