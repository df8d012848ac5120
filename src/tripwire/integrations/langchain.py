"""Deprecated path: moved to ``tripwire.harnesses.integrations.langchain``,
whose names this module forwards
(with a ``DeprecationWarning``) until the next release."""

from tripwire.base.lazy import moved

__getattr__, __dir__ = moved("tripwire.integrations.langchain",
                              "tripwire.harnesses.integrations.langchain")
