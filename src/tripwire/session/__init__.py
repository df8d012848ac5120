"""tripwire.session."""
