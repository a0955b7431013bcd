"""Let ``import aiter`` give the reference, for tests on machines without aiter.

The stand-in is a package named ``aiter`` with the submodules and names vLLM's
ROCm MLA backend (``vllm/v1/attention/backends/mla/rocm_aiter_mla.py`` and
``vllm/_aiter_ops.py``, releases 0.28 to 0.33) imports from aiter, as aiter
e4048607 has them: the four planners, ``dtypes``, the attention kernels (which
raise :class:`NotImplementedError`) and ``aiter.jit.core.AITER_CSRC_DIR``
(a folder that does not exist, so source probes read nothing). Names aiter
e4048607 does not have (``aiter.ops.triton.gluon.mla_decode_gluon``,
``aiter.ops.triton.fusions.fused_mla_prefill_qkv_fp8``) are absent here too,
so a builder's fallbacks run as they would on that aiter.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

#: Where aiter would keep its C++ sources; deliberately absent.
AITER_CSRC_DIR = "/nonexistent/mla-golden-reference/aiter/csrc"


def _is_aiter(name: str) -> bool:
    return name == "aiter" or name.startswith("aiter.")


def _package(name: str, **attrs: Any) -> ModuleType:
    module = ModuleType(name, f"mla-golden stand-in for {name} (aiter e4048607's names; kernels raise)")
    module.__path__ = []  # a package: its submodules come from sys.modules only
    # importlib.util.find_spec("aiter") (how vLLM asks whether aiter is installed) needs a spec
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__dict__.update(attrs)
    return module


def stand_in_modules(version: str | None = None) -> dict[str, ModuleType]:
    """A fresh stand-in ``aiter`` package and its submodules, by module name.

    ``version`` (a commit prefix, release tag or date: see ``reference.at``)
    serves that aiter version's planners; the default is the newest ported.
    """
    import mla_golden.reference as reference
    from mla_golden.reference import _kernels, dtypes

    source = reference if version is None else reference.at(version)
    planners = {
        name: getattr(source, name)
        for name in ("get_mla_metadata_info_v1", "get_mla_metadata_v1", "get_ps_metadata_info_v1", "get_ps_metadata_v1")
    }
    mla = _package("aiter.mla", mla_decode_fwd=_kernels.mla_decode_fwd)
    triton_mla = _package("aiter.ops.triton.attention.mla", mla_decode_fwd=_kernels.triton_mla_decode_fwd)
    mla_gluon = _package("aiter.ops.triton.gluon.mla_gluon", mla_gluon=_kernels.mla_gluon)
    core = _package("aiter.jit.core", AITER_CSRC_DIR=AITER_CSRC_DIR)
    modules = {
        "aiter.mla": mla,
        "aiter.utility.dtypes": dtypes,
        "aiter.utility": _package("aiter.utility", dtypes=dtypes),
        "aiter.jit.core": core,
        "aiter.jit": _package("aiter.jit", core=core),
        "aiter.ops.triton.attention.mla": triton_mla,
        "aiter.ops.triton.attention": _package("aiter.ops.triton.attention", mla=triton_mla),
        "aiter.ops.triton.gluon.mla_gluon": mla_gluon,
        "aiter.ops.triton.gluon": _package("aiter.ops.triton.gluon", mla_gluon=mla_gluon),
    }
    modules["aiter.ops.triton"] = _package(
        "aiter.ops.triton", attention=modules["aiter.ops.triton.attention"], gluon=modules["aiter.ops.triton.gluon"]
    )
    modules["aiter.ops"] = _package("aiter.ops", triton=modules["aiter.ops.triton"])
    modules["aiter"] = _package(
        "aiter",
        **planners,
        dtypes=dtypes,
        mla=mla,
        ops=modules["aiter.ops"],
        jit=modules["aiter.jit"],
        utility=modules["aiter.utility"],
        mla_prefill_ps_asm_fwd=_kernels.mla_prefill_ps_asm_fwd,
        mla_reduce_v1=_kernels.mla_reduce_v1,
        flash_attn_varlen_func=_kernels.flash_attn_varlen_func,
    )
    return modules


@contextlib.contextmanager
def as_aiter(version: str | None = None) -> Iterator[ModuleType]:
    """Install the stand-in ``aiter`` in ``sys.modules`` for the block, then put back what was there.

    ``version`` picks the planners of an older aiter (``reference.at(version)``);
    the other names are e4048607's whatever the version.

    Any ``aiter`` modules already loaded are hidden for the block (so an
    installed aiter's submodules cannot mix in) and restored after it;
    ``aiter`` modules imported during the block are removed. Under
    ``mla-golden record -- COMMAND`` the block's planner calls are recorded.
    """
    modules = stand_in_modules(version)  # an unknown version raises here, before anything is touched
    saved = {name: module for name, module in sys.modules.items() if _is_aiter(name)}
    for name in saved:
        del sys.modules[name]
    sys.modules.update(modules)
    from mla_golden.reference.stand_in_hooks import around

    try:
        with around(modules["aiter"]):  # `mla-golden record -- COMMAND` records the block (it sees no import)
            yield modules["aiter"]
    finally:
        for name in [n for n in sys.modules if _is_aiter(n)]:
            del sys.modules[name]
        sys.modules.update(saved)
