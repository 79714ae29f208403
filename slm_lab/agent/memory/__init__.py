"""Memories (`registry.MEMORIES` by spec name)."""
