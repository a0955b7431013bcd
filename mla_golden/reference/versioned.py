"""``mla_golden.reference.at(version)``: the reference planners as one aiter version has them.

Each version is a module-like object with that version's Python signatures
(``get_mla_metadata_v1``, ``get_mla_metadata_info_v1``, the PS planner and
``MlaVersion`` where the version has it) over the one planner core, told
apart by the version's :class:`~mla_golden.reference.features.PlannerFeatures`.
The device context, :func:`allow_undefined` and the environment flags are
shared: they apply to every version alike.
"""

from __future__ import annotations

import types
from functools import cache

from mla_golden.reference import _device, _undefined, errors, mla_v1, ps_v1
from mla_golden.reference.features import Signature
from mla_golden.reference.versions import PlannerVersion, resolve_version

#: What every planner module on the CPU shares with the reference, by attribute name: the simulated
#: device, undefined results and the errors (a reference version's, an aiter-src tree's).
SIMULATION = {
    "DEFAULT_DEVICE": _device.DEFAULT_DEVICE,
    "Device": _device.Device,
    "current_device": _device.current_device,
    "device": _device.device,
    "UNDEFINED_PLACEHOLDER": _undefined.UNDEFINED_PLACEHOLDER,
    "allow_undefined": _undefined.allow_undefined,
    "AiterCheckError": errors.AiterCheckError,
    "BufferTooSmallError": errors.BufferTooSmallError,
    "UndefinedResultError": errors.UndefinedResultError,
}
#: What every version shares, by attribute name.
_SHARED = {
    **SIMULATION,
    "get_ps_metadata_info_v1": ps_v1.get_ps_metadata_info_v1,
    "get_ps_metadata_v1": ps_v1.get_ps_metadata_v1,
}


class ReferenceVersion(types.ModuleType):
    """The reference planners of one aiter version, usable wherever the ``aiter`` module is.

    ``version`` says which (:class:`~mla_golden.reference.versions.PlannerVersion`).
    """

    version: PlannerVersion

    def __repr__(self) -> str:
        return f"<mla_golden.reference at aiter {self.version.name} ({self.version.date})>"


@cache
def _build(version: PlannerVersion) -> ReferenceVersion:
    module = ReferenceVersion(f"mla_golden.reference@{version.name}", __doc__)
    module.version = version
    for name, value in _SHARED.items():
        setattr(module, name, value)
    features = version.features
    signature = {
        Signature.NO_PAGES: mla_v1.no_pages_signature,
        Signature.PAGED: mla_v1.paged_signature,
        Signature.NOPE_ROPE: mla_v1.nope_rope_signature,
    }[features.signature]
    module.get_mla_metadata_v1 = signature(features)  # type: ignore[attr-defined]
    module.get_mla_metadata_info_v1 = mla_v1.sizing_signature(features)  # type: ignore[attr-defined]
    if features.signature is Signature.NOPE_ROPE:
        module.MlaVersion = mla_v1.MlaVersion  # type: ignore[attr-defined]
    return module


def at(version: str | PlannerVersion) -> ReferenceVersion:
    """The reference planners of aiter ``version``: a commit prefix (>= 7 hex), a release tag or a date.

    A date ``YYYY-MM-DD`` picks the newest ported version committed at or
    before it. Raises :class:`~mla_golden.reference.errors.UnknownVersionError`
    (a ``ValueError``) listing the known versions when ``version`` names none.
    The same version always gives the same object.
    """
    return _build(resolve_version(version))
