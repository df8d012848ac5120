"""tripwire.identity."""
