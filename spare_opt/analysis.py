"""analysis (STUB)."""
