"""Capture: planner calls intercepted wherever a builder reaches them and turned into Calls, written masks included.

A grouping package: it exports nothing, so importing one of its modules loads only that module (each sits in its own layer, docs/architecture.md).
"""
