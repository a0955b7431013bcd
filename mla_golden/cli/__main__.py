"""``python -m mla_golden.cli``: the ``mla-golden`` command."""

from mla_golden.cli import main

main()
