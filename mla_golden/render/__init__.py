"""Rendering: diffs, checks and goldens as text, JSON, CI formats, SVG, HTML and PNG, with every foreign string neutralised for its sink.

A grouping package: it exports nothing, so importing one of its modules loads only that module (each sits in its own layer, docs/architecture.md).
"""
