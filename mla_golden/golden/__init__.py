"""Golden files: the format a Call is stored in, the rules a stored call must meet, the store that keys them, where the plugin keeps them.

A grouping package: it exports nothing, so importing one of its modules loads only that module (each sits in its own layer, docs/architecture.md).
"""
