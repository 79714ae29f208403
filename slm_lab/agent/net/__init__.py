"""Nets (`registry.NETS` by spec type, `registry.build_net`); `config` holds what validation needs, torch-free."""
