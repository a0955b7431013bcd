"""What runs around :func:`mla_golden.reference.as_aiter`'s block, registered from above.

The reference is the house's bottom floor: it must not import the recorder
that ``mla-golden record -- COMMAND`` installs. That recorder registers its
block here instead (:func:`mla_golden.capture.import_hook.install`), and the stand-in
enters every registered block around its own: the stand-in is put in
``sys.modules`` directly, so no import (and no finder) ever sees it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from types import ModuleType

#: A block around the stand-in's: given the stand-in ``aiter`` module.
Hook = Callable[[ModuleType], AbstractContextManager[None]]

_hooks: list[Hook] = []


def register(hook: Hook) -> None:
    """Enter ``hook`` around every later stand-in block (once, however often it is registered)."""
    if hook not in _hooks:
        _hooks.append(hook)


@contextlib.contextmanager
def around(module: ModuleType) -> Iterator[None]:
    """Every registered block entered for ``module``, in registration order."""
    with contextlib.ExitStack() as stack:
        for hook in list(_hooks):
            stack.enter_context(hook(module))
        yield
