"""tripwire.base."""
