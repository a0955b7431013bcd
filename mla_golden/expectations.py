"""``with expect(target, golden_dir): ...``: spy on a block and compare its calls with their goldens on exit.

A builder whose planner raises (a plan that outgrew the buffers the builder
sized) dies inside ``build()`` before any assertion after the block could run,
hiding the diff that explains it (the dtypes it dropped). ``expect`` compares
on exit even when the block raised: the planner's error is re-raised
unchanged, with the golden report chained to it as its cause, so the
traceback shows the report first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Literal

from mla_golden.assertions import PYTHON_HINTS, Comparison, Hints, Update, compare_with_golden
from mla_golden.capture.recorder import Spy
from mla_golden.differ import DEFAULT_MAX_ITEMS
from mla_golden.errors import GoldenError, GoldenMismatch
from mla_golden.golden.store import GoldenStore

__all__ = ["Expect", "GoldenMismatch", "ReportingSpy", "expect"]


def raise_failures(failures: list[str], exc: BaseException | None) -> None:
    """Raise ``failures`` as one :class:`GoldenMismatch`; when the block raised ``exc``, chain them to it instead.

    The report becomes ``exc``'s cause, so a traceback shows it before the
    planner's error, which then propagates unchanged.
    """
    __tracebackhide__ = True
    if not failures:
        return
    report = GoldenMismatch("\n".join(failures))
    if exc is None:
        raise report
    report.__cause__ = exc.__cause__  # keep what the block's error was already chained to
    exc.__cause__ = report


class Expect:
    """The context manager :func:`expect` returns; ``__enter__`` gives the :class:`Spy`.

    Calls are keyed ``name``, ``name-1``, ``name-2``... in call order (or by
    their derived keys without a name). ``on_compare`` sees every comparison
    (the pytest fixture records what was read and written through it).
    """

    def __init__(
        self,
        target: ModuleType | str,
        golden_dir: Path | str,
        *,
        name: str | None = None,
        update: bool | Update = False,
        keep_obtained: bool = False,
        on_compare: Callable[[Comparison], None] | None = None,
        max_items: int = DEFAULT_MAX_ITEMS,
        hints: Hints = PYTHON_HINTS,
    ) -> None:
        self.golden_dir = Path(golden_dir)
        self.max_items = max_items
        self.hints = hints
        self.name = name
        self.update = Update.of(update)
        self.keep_obtained = keep_obtained
        self.on_compare = on_compare
        self.spy = Spy(target)
        self.comparisons: list[Comparison] = []

    def key(self, index: int) -> str | None:
        """The key of the block's ``index``-th call (None: derived from the call)."""
        if self.name is None:
            return None
        return self.name if index == 0 else f"{self.name}-{index}"

    def __enter__(self) -> Spy:
        return self.spy.__enter__()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        __tracebackhide__ = True
        self.spy.__exit__(exc_type, exc, tb)
        raise_failures(self._compare(), exc)
        return False  # the block's own exception, if any, goes on

    def _compare(self) -> list[str]:
        failures = []
        calls = self.spy.calls.all()
        for index, call in enumerate(calls):
            try:
                result = compare_with_golden(
                    call,
                    self.golden_dir,
                    name=self.key(index),
                    update=self.update,
                    keep_obtained=self.keep_obtained,
                    max_items=self.max_items,
                    hints=self.hints,
                )
            except GoldenError as exc:  # one unreadable golden never stops the others from being checked
                failures.append(f"call {index} of the block ({call.op}): {exc}")
                continue
            self.comparisons.append(result)
            if self.on_compare is not None:
                self.on_compare(result)
            if result.failure is not None:
                failures.append(f"call {index} of the block: {result.failure}")
        missing = self.key(len(calls))
        # a rewriting mode leaves such a golden to be found unused (and deleted with the rest)
        if missing is not None and self.update in (Update.CHECK, Update.NEW) and GoldenStore(self.golden_dir).exists(missing):
            path = GoldenStore(self.golden_dir).path_for(missing)
            failures.append(f"golden {path} expects call {len(calls)} of the block, which made only {len(calls)} call(s)")
        return failures


class ReportingSpy(Spy):
    """A spy that, when its block raises, reports the calls that raised against their goldens.

    A planner that raises inside a builder stops the test before the
    ``assert_matches`` after the block names the golden to compare with, so
    each call that raised is compared with the golden under ``folder``
    holding the same op and inputs (the one that assertion would have
    checked), and the report is chained to the error as :class:`Expect` does.
    """

    def __init__(
        self,
        *targets: ModuleType | str,
        golden_dir: Path,
        folder: Path,
        on_compare: Callable[[Comparison], None],
        max_items: int = DEFAULT_MAX_ITEMS,
        hints: Hints = PYTHON_HINTS,
    ) -> None:
        super().__init__(*targets)
        self.golden_dir = golden_dir
        self.folder = folder
        self.on_compare = on_compare
        self.max_items = max_items
        self.hints = hints

    def __exit__(self, *exc_info: object) -> None:
        __tracebackhide__ = True
        super().__exit__(*exc_info)
        exc = exc_info[1]
        if isinstance(exc, Exception):
            raise_failures(self._compare_raised(), exc)

    def _compare_raised(self) -> list[str]:
        failures = []
        for index, call in enumerate(self.calls.all()):
            if call.error is None:
                continue
            try:
                golden = next(iter(GoldenStore(self.folder).same_inputs(call)), None)
                if golden is None:
                    continue
                result = compare_with_golden(
                    call, self.golden_dir, name=golden.key, keep_obtained=True, max_items=self.max_items, hints=self.hints
                )
            except GoldenError as error:
                failures.append(f"call {index} of the block ({call.op}): {error}")
                continue
            self.on_compare(result)
            if result.failure is not None:
                failures.append(f"call {index} of the block: {result.failure}")
        return failures


def expect(
    target: ModuleType | str, golden_dir: Path | str, *, name: str | None = None, update: bool | Update = False
) -> Expect:
    """Spy on ``target`` (like :func:`spy`) inside the block; on exit compare each call with its golden.

    >>> with mla_golden.expect(aiter, "goldens", name="decode-step"):
    ...     builder.build(...)

    A mismatch raises :class:`GoldenMismatch` with the report; when the block
    itself raised (a planner error), that error is re-raised with the report
    chained as its cause. ``update=True`` writes the goldens instead (an
    :class:`~mla_golden.assertions.Update` picks another mode).
    """
    return Expect(target, golden_dir, name=name, update=update)
