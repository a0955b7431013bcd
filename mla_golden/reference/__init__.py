"""Bit-exact CPU ports of aiter's MLA metadata planners.

Mirrors aiter's Python API (names and signatures as at aiter commit
e4048607a535, 2026-08-22) so it can stand in for the ``aiter`` module:
``get_mla_metadata_info_v1`` / ``get_mla_metadata_v1`` (decode) and
``get_ps_metadata_info_v1`` / ``get_ps_metadata_v1`` (prefill). The GPU they
plan for comes from :func:`device`; ``AITER_ENABLE_EXPERIMENTAL`` and
``AITER_MLA_META_USE_PARALLEL`` are read from ``os.environ`` at call time, as
aiter does.

Where aiter aborts on a failed ``AITER_CHECK`` the reference raises
:class:`AiterCheckError` with aiter's message; where aiter would write past a
caller's buffer it raises :class:`BufferTooSmallError`; where aiter's result is
undefined it raises :class:`UndefinedResultError` (inside
:func:`allow_undefined` it returns, with :data:`UNDEFINED_PLACEHOLDER` where
aiter's value is not determined by the inputs).

``with as_aiter():`` makes ``import aiter`` give a stand-in serving these
planners, :mod:`~mla_golden.reference.dtypes` (fp8 per device, as aiter's) and
aiter's kernel names (which raise), so builder code written against aiter,
vLLM's included, runs unchanged in tests.

This module plans as the newest ported aiter version (``version``, ``versions()[-1]``);
``at(version)`` gives an older one (a commit prefix, release tag or date),
``versions()`` lists them oldest first.
"""

from mla_golden.reference import dtypes
from mla_golden.reference._device import DEFAULT_DEVICE, FULL_PART_CUS, LDS_BYTES, Device, current_device, device
from mla_golden.reference._stand_in import as_aiter
from mla_golden.reference._undefined import UNDEFINED_PLACEHOLDER, allow_undefined
from mla_golden.reference.errors import (
    AiterCheckError,
    BufferTooSmallError,
    PreconditionError,
    UndefinedResultError,
    UnknownVersionError,
)
from mla_golden.reference.mla_v1 import MlaVersion
from mla_golden.reference.ps_v1 import get_ps_metadata_info_v1, get_ps_metadata_v1
from mla_golden.reference.versioned import ReferenceVersion, at
from mla_golden.reference.versions import PlannerVersion, latest, versions

#: The aiter version this module plans as: the newest ported one. Its decode planner and sizing
#: helper are ``at(version)``'s own objects, so registering a newer version makes it the default.
version: PlannerVersion = latest()
get_mla_metadata_v1 = at(version).get_mla_metadata_v1
get_mla_metadata_info_v1 = at(version).get_mla_metadata_info_v1

__all__ = [
    "DEFAULT_DEVICE",
    "FULL_PART_CUS",
    "LDS_BYTES",
    "AiterCheckError",
    "BufferTooSmallError",
    "Device",
    "MlaVersion",
    "PlannerVersion",
    "ReferenceVersion",
    "PreconditionError",
    "UNDEFINED_PLACEHOLDER",
    "UndefinedResultError",
    "UnknownVersionError",
    "allow_undefined",
    "at",
    "as_aiter",
    "current_device",
    "device",
    "dtypes",
    "get_mla_metadata_info_v1",
    "get_mla_metadata_v1",
    "get_ps_metadata_info_v1",
    "get_ps_metadata_v1",
    "version",
    "versions",
]
