"""Deprecated path: moved to ``tripwire.harnesses.integrations.openai_agents``,
whose names this module forwards
(with a ``DeprecationWarning``) until the next release."""

from tripwire.base.lazy import moved

__getattr__, __dir__ = moved("tripwire.integrations.openai_agents",
                              "tripwire.harnesses.integrations.openai_agents")
