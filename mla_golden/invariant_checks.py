"""Invariant checks under names that say what they do (no golden involved).

``invariants(call)`` returns the result and never raises; ``assert_invariants(call)``
raises :class:`InvariantsViolated` with the report. They replace the module's
``check``, which read like the pytest fixture's golden assertion.
"""

from __future__ import annotations

from mla_golden.call import Call
from mla_golden.checks import CheckResult, check
from mla_golden.errors import InvariantsViolated
from mla_golden.render.report import render_check_text

__all__ = ["InvariantsViolated", "assert_invariants", "invariants"]


def invariants(call: Call) -> CheckResult:
    """What the kernels rely on, checked on ``call``'s written metadata; ``result.ok`` is the verdict."""
    return check(call)


def assert_invariants(call: Call) -> CheckResult:
    """Like :func:`invariants`, but raise :class:`InvariantsViolated` unless ``result.ok``."""
    __tracebackhide__ = True
    result = check(call)
    if not result.ok:
        raise InvariantsViolated(render_check_text(result), result)
    return result
