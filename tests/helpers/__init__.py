"""Helpers the tests share (import as ``helpers.cli``, ``helpers.processes``): one copy of each, not one per test file."""
