"""The SQL → M3 compiler: one pass per module, driven by :mod:`.pipeline` (which lists them in order)."""

from .pipeline import compile_sql, compile_to_text, compile_with_notes

__all__ = ["compile_sql", "compile_to_text", "compile_with_notes"]
