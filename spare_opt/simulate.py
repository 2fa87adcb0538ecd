"""simulate (STUB)."""
