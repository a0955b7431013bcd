"""Every error mla-golden raises, under one base class users can catch.

Every class survives pickling (a process pool sends a worker's exception to
its parent that way): those that take more than a message say how to rebuild
themselves in ``__reduce__``.

Each class also keeps the built-in base it had (``LookupError``,
``ValueError``, ``RuntimeError``, ``ImportError``), so code that caught those
keeps working. The modules that raise them re-export them under their old
names (``mla_golden.reference.AiterCheckError`` and so on).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mla_golden.checks.results import CheckResult


class MlaGoldenError(Exception):
    """Base of every error mla-golden raises on purpose."""


class GoldenError(MlaGoldenError):
    """A golden file that cannot be used, or a golden that cannot be written.

    Always names the file and what is wrong with it.
    """

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem

    def __reduce__(self) -> tuple[type, tuple[Path, str]]:
        return type(self), (self.path, self.problem)


class NotAGoldenError(GoldenError):
    """A file that holds no golden at all: not a safetensors file, or one without mla-golden's metadata (model
    weights, another tool's tensors). The message says what the file holds; a golden that is corrupt is a plain
    :class:`GoldenError` naming the rule it breaks."""

    def __init__(self, path: Path | str, holds: str) -> None:
        super().__init__(path, f"not an mla-golden file: {holds}")
        self.holds = holds

    def __reduce__(self) -> tuple[type, tuple[Path, str]]:
        return type(self), (self.path, self.holds)


class CallNotFound(MlaGoldenError, LookupError):
    """``Calls.one`` found zero or several calls."""


class NothingToIntercept(MlaGoldenError, LookupError):
    """spy() found no planner function in its targets (aiter not importable, or a module without them)."""


class AdaptationError(MlaGoldenError, ValueError):
    """A recorded call cannot be expressed in the target function's signature."""


class MatrixError(MlaGoldenError, ValueError):
    """A matrix file that cannot be used; the message names file, line and key."""


class BackendError(MlaGoldenError, RuntimeError):
    """The requested backend cannot be used here (the message says why)."""


class AiterSourceError(BackendError, ValueError):
    """An aiter tree the ``aiter-src`` backend cannot use: no such path or revision, no planner
    sources, no C++ compiler, a build error, or a harness that failed. The message names which."""


class HookError(MlaGoldenError, RuntimeError):
    """The command could not be started."""


class Interrupted(MlaGoldenError):
    """A run stopped by SIGINT or SIGTERM: ``results`` holds what it did before (nothing more is written)."""

    def __init__(self, signum: int, results: list[Any]) -> None:
        super().__init__(f"interrupted by signal {signum} after {len(results)} result(s)")
        self.signum = signum
        self.results = results

    def __reduce__(self) -> tuple[type, tuple[int, list[Any]]]:
        return type(self), (self.signum, self.results)


#: What planner code may raise that is no ``Exception``: it fails that call (:class:`PlannerExited`), never ends the
#: command (a plug-in's ``sys.exit(0)`` once made record, diff and sweep exit 0 having done nothing).
PLANNER_EXITS = (SystemExit, KeyboardInterrupt)


class PlannerExited(MlaGoldenError):
    """Planner code raised SystemExit or KeyboardInterrupt: that call failed (the message says which)."""

    @classmethod
    def of(cls, raised: BaseException) -> PlannerExited:
        return cls(f"planner code raised {raised!r}: that call failed (planner code cannot end the command)")


class WorkerDied(MlaGoldenError, RuntimeError):
    """A ``--jobs`` worker process ended abruptly: planner code that ends its process (``os._exit``) or crashes it (a
    segfault) cannot be one call's failure, so the run stops there and reports nothing it had not finished."""


class PlotExtraMissing(MlaGoldenError, ImportError):
    """matplotlib is not installed."""


class GoldenMismatch(MlaGoldenError, AssertionError):
    """Calls made inside an ``expect`` block that do not match their goldens; the message is the report."""


class InvariantsViolated(MlaGoldenError, AssertionError):
    """A call's metadata breaks what the kernels rely on; the message is the report, ``result`` the findings."""

    def __init__(self, report: str, result: CheckResult) -> None:
        super().__init__(report)
        self.result = result

    def __reduce__(self) -> tuple[type, tuple[str, CheckResult]]:
        return type(self), (str(self), self.result)


# ---------------------------------------------------------------- the reference planners


class AiterCheckError(MlaGoldenError, RuntimeError):
    """An input aiter rejects with a failed ``AITER_CHECK``.

    aiter prints ``[AITER] <source> <message>`` and aborts the process; the
    reference raises instead, carrying aiter's message verbatim.
    """

    def __init__(self, message: str, source: str) -> None:
        super().__init__(f"[AITER] {source} {message}")
        self.message = message
        self.source = source

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.message, self.source)


class BufferTooSmallError(MlaGoldenError, ValueError):
    """A caller's output buffer is smaller than what the planner must write.

    aiter would silently write past the end (cf. aiter issue 5559); the
    reference refuses and touches nothing.
    """

    def __init__(self, buffer: str, numel: int, needed: int) -> None:
        super().__init__(
            f"output buffer {buffer!r} holds {numel} elements but the planner "
            f"must write {needed}; size it larger"
        )
        self.buffer = buffer
        self.numel = numel
        self.needed = needed

    def __reduce__(self) -> tuple[type, tuple[str, int, int]]:
        return type(self), (self.buffer, self.numel, self.needed)


class UndefinedResultError(MlaGoldenError, RuntimeError):
    """aiter's result for these inputs is not defined by the inputs.

    It reads memory past the end of an input tensor or LDS before writing it,
    so any value it returns would be made up.
    """


class UnknownVersionError(MlaGoldenError, ValueError):
    """A planner version that names no ported aiter version (commit prefix, release tag or date).

    The message lists the versions the reference knows.
    """


# ---------------------------------------------------------------- sweeps


class SpecError(MlaGoldenError, ValueError):
    """A sweep planner spec that cannot be parsed or resolved; the message names the spec and the problem."""


class SpaceError(MatrixError):
    """A sweep space that cannot be used; the message names file, line and key."""


class SweepError(MlaGoldenError, ValueError):
    """Bad input to a sweep (the message names the argument or file)."""


class JournalError(SweepError):
    """A sweep's ``--out`` holds a journal this sweep cannot continue (another sweep's, or unreadable)."""


class ExecutorError(MlaGoldenError, RuntimeError):
    """A sweep executor that cannot start here (Ray missing, a cluster that cannot be reached)."""


class PreconditionError(MlaGoldenError, ValueError):
    """An argument that breaks a precondition aiter's planner relies on but does not check.

    aiter would plan garbage (or crash) on it; the reference names the
    argument and what is wrong instead.
    """

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(f"{argument}: {problem}")
        self.argument = argument
        self.problem = problem

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.argument, self.problem)
