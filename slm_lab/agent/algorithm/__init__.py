"""Algorithms (`registry.ALGORITHMS` by spec name); `config` declares what validation needs, torch-free."""
