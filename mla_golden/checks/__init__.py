"""Semantic invariants of planner metadata, checked without a golden.

Parts: :mod:`.results` (what a check finds), :mod:`.common` (CSR, coverage,
split and reduce checks every op shares), :mod:`.decode` and :mod:`.prefill`
(each op's layout); the text report is :func:`mla_golden.render.report.render_check_text`.

A diff needs a known-good golden; :func:`check` needs only the call. It asserts
what aiter's persistent MLA kernels rely on to compute correct attention, so a
planner defect (an aiter upgrade, a builder passing the wrong arguments) shows
up even on the first recording. It reads only elements the planner wrote.

Where a value is "as aiter defines it" (head folding, the causal KV trim per
query tile, ``kv_offset``), the definition is that of the aiter version that
recorded the call, else of the newest ported one (``versions.latest()``):
``csrc/kernels/mla/metadata/v1_2_device.cuh`` (decode, ``get_mla_metadata_v1``,
via the dispatch of :mod:`mla_golden.reference.mla_v1_dispatch`) and
``csrc/kernels/mla/metadata/v1_2_host.cuh`` (prefill, ``get_ps_metadata_v1``).
The *layout* (which ranges each planned batch and query tile must cover) comes
from those definitions; everything the scheduler decides (work placement, split
points, partial slots, reduce groups) is checked against it.

Violations say the metadata is wrong; hazards say the inputs have a shape that
the version mishandles (reads past an input, reads LDS before writing it,
writes past a helper-sized buffer, aborts), whatever the outputs look like.

Each defect is reported once, where it is: a work that fits no tile is reported
as such and the gap it leaves in its tile is not; a plan folded differently
from what that version runs (another aiter) is reported once and then checked
under its own folding, so a real defect inside it still shows. Elements not
written (``indeterminate`` in conformance records) are never read.
"""

from __future__ import annotations

from mla_golden.call import Call
from mla_golden.checks.common import Checker, refused_buffers
from mla_golden.checks.decode import check_decode
from mla_golden.checks.prefill import check_prefill
from mla_golden.checks.results import HAZARDS, INVARIANTS, CheckResult, Hazard, Violation
from mla_golden.schema import MLA_OP, PS_OP

__all__ = ["HAZARDS", "INVARIANTS", "CheckResult", "Hazard", "Violation", "check"]


def check(call: Call) -> CheckResult:
    """Check ``call``'s metadata against what the kernels need; no golden involved.

    Only elements the planner wrote are read. ``result.ok`` is False when any
    invariant is violated; hazards never make a call fail.
    """
    from mla_golden import limits
    from mla_golden.planner_id import rules_version

    checker = Checker(call)
    checker.result.rules = rules_version(call.provenance).name
    beyond = limits.problems(call)
    if beyond:  # the checks plan with the params: not with ones no aiter call can have
        for problem in beyond:
            checker.flag("call.precondition", "params", problem)
        checker.skip("every other check", "the params are beyond what aiter takes or can address")
        return checker.result
    refused = refused_buffers(call)
    if refused:  # no plan of the planner's sits in buffers it refuses
        for buffer, problem in refused:
            checker.flag("call.precondition", buffer, problem)
        checker.skip("every other check", "the planner refuses these buffers")
        return checker.result
    if call.op == MLA_OP:
        check_decode(checker)
    elif call.op == PS_OP:
        check_prefill(checker)
    else:
        raise ValueError(f"check: unknown op {call.op!r}")
    _check_preconditions(checker)
    return checker.result


def _check_preconditions(c: Checker) -> None:
    """The planner's preconditions (reference.preconditions) on the recorded arguments, unless already flagged."""
    from mla_golden.reference.preconditions import problems

    arguments = {**c.call.params, **c.call.inputs}
    flagged = " ".join(v.where for v in c.result.violations)
    for argument, problem in problems(c.call.op, arguments, str(c.call.device.get("arch"))):
        if argument not in flagged:
            c.flag("call.precondition", argument, problem)
