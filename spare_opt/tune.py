"""tune (STUB)."""
