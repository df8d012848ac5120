"""tripwire.harnesses."""
