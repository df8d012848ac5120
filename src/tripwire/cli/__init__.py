"""tripwire.cli."""
