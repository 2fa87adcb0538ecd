"""theory (STUB)."""
