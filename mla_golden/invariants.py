"""Invariant checks under names that say what they do (no golden involved).

``invariants(call)`` returns the result and never raises; ``assert_invariants(call)``
raises :class:`InvariantsViolated` with the report. They replace the module's
``check``, which read like the pytest fixture's golden assertion.
"""

from __future__ import annotations

from mla_golden.call import Call
from mla_golden.checks import CheckResult, check, render_check_text


class InvariantsViolated(AssertionError):
    """A call's metadata breaks what the kernels rely on; the message is the report."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(render_check_text(result))
        self.result = result


def invariants(call: Call) -> CheckResult:
    """What the kernels rely on, checked on ``call``'s written metadata; ``result.ok`` is the verdict."""
    return check(call)


def assert_invariants(call: Call) -> CheckResult:
    """Like :func:`invariants`, but raise :class:`InvariantsViolated` unless ``result.ok``."""
    __tracebackhide__ = True
    result = check(call)
    if not result.ok:
        raise InvariantsViolated(result)
    return result
