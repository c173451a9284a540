"""Editing help: completions, signatures and diagnostics while typing."""
