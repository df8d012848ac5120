"""tripwire.policy."""
