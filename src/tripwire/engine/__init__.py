"""tripwire.engine."""
