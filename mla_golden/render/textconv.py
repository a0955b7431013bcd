"""A golden as stable text, one line per row, for ``git diff`` (``mla-golden textconv``).

Goldens are binary, so a pull request shows "Binary files differ". Git runs a
textconv command on both sides of a changed file and diffs the text; for that
diff to show what changed and nothing else, the text is a pure function of
the call: params, device, env, inputs, and per output buffer the runs of
elements written and one line per row (a work item, a reduce group's map
entry, or 16 values of a flat buffer). Nothing that changes when the same
call is recorded again (time, torch version, content digest) is printed.

A section longer than ``2 * TEXT_ENDS`` lines (a golden of a million work
items) keeps its first and last :data:`TEXT_ENDS` lines and one line for the
rest: how many, and a digest of their values, so a change there still shows
in ``git diff`` (``mla-golden textconv --all`` prints every line).
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from mla_golden.call import Call
from mla_golden.golden.store import Golden
from mla_golden.planner_id import planner_label
from mla_golden.render.sanitize import inline
from mla_golden.schema import OUTPUTS, POINTER_OUTPUT, format_cell, schema_for

#: Values per line of a flat (1-D) buffer or input.
FLAT_PER_LINE = 16
#: Lines kept at each end of a longer section (every shipped golden is shorter, so its text is whole).
TEXT_ENDS = 5000


def golden_text(golden: Golden, *, ends: int | None = TEXT_ENDS) -> str:
    """The text form of a golden: a header, then one line per scalar, input chunk and output row.

    ``ends``: lines kept at each end of a section longer than twice that (None: every line).
    """
    call = golden.call
    lines = [f"golden {golden.key}", f"op {call.op}", f"planner {planner_label(call.provenance)}"]
    lines += [f"param {name} = {_value(value)}" for name, value in sorted(call.params.items())]
    lines += [f"device {name} = {_value(value)}" for name, value in sorted(call.device.items())]
    lines += [f"env {name} = {_value(value)}" for name, value in sorted(call.env.items())]
    for name, tensor in call.inputs.items():
        flat = tensor.reshape(-1)
        lines += _flat_rows(f"input {name}", flat, torch.ones_like(flat, dtype=torch.bool), ends, masked=False)
    if call.error is not None:
        lines.append(f"error {call.error}")
    else:
        for name in OUTPUTS:
            if name in call.buffers:
                lines += _buffer_lines(call, name, ends)
    return "".join(f"{inline(line)}\n" for line in lines)  # a key or error holding a newline stays on its line


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _runs(mask: torch.Tensor) -> str:
    """Written positions as half-open runs: ``[0, 120) [130, 131)``; ``none`` when nothing was written."""
    flags = torch.cat([torch.zeros(1, dtype=torch.int8), mask.reshape(-1).to(torch.int8), torch.zeros(1, dtype=torch.int8)])
    edges = (flags[1:] - flags[:-1]).nonzero().reshape(-1).tolist()  # starts and ends, alternating
    return " ".join(f"[{a}, {b})" for a, b in zip(edges[::2], edges[1::2])) or "none"


def _buffer_lines(call: Call, name: str, ends: int | None) -> list[str]:
    spec = call.buffers[name]
    values, written = call.outputs.get(name), call.written.get(name)
    head = f"buffer {name} {spec.get('dtype')} {list(spec.get('shape', []))}"
    if values is None or written is None:
        return [f"{head} not kept"]
    if name == POINTER_OUTPUT:  # raw device pointers: they differ on every run and are never compared
        return [f"{head} written {int(written.sum())} (device pointers, not shown)"]
    if values.dim() == 2:
        any_written = written.any(dim=1)
        rows = any_written.nonzero().reshape(-1)
        lines = [f"{head} written rows {_runs(any_written)}"]
        columns = schema_for(call.op).work_columns if name == "work_info_set" else None
        kept, left_out = _ends(rows.numel(), ends)
        picked = rows[kept]
        for row, row_values, row_written in zip(picked.tolist(), values[picked].tolist(), written[picked].tolist()):
            lines.append(_row_line(name, row, row_values, row_written, columns))
        if left_out is not None:
            lines.insert(1 + left_out[0], _left_out(name, rows[left_out[0] : left_out[1]], values, written))
        return lines
    flat, mask = values.reshape(-1), written.reshape(-1)
    return [f"{head} written {_runs(mask)}", *_flat_rows(name, flat, mask, ends, masked=True)]


def _ends(count: int, ends: int | None) -> tuple[torch.Tensor, tuple[int, int] | None]:
    """Which of ``count`` lines to print: all, or the first and last ``ends`` and the [start, stop) left out."""
    if ends is None or count <= 2 * ends:
        return torch.arange(count), None
    return torch.cat([torch.arange(ends), torch.arange(count - ends, count)]), (ends, count - ends)


def _left_out(label: str, rows: torch.Tensor, values: torch.Tensor, written: torch.Tensor) -> str:
    """One line for the rows (or flat elements) left out: how many, and a digest of their values and flags."""
    digest = hashlib.sha256()
    for tensor in (rows.to(torch.int64), values[rows].to(torch.int64), written[rows]):
        digest.update(tensor.contiguous().numpy().tobytes())
    first, last = int(rows[0]), int(rows[-1])
    what = "rows" if values.dim() == 2 else "elements"
    return (
        f"{label} {what} {first}..{last}: {rows.numel()} not shown (sha256 {digest.hexdigest()[:16]}; "
        "mla-golden textconv --all shows them)"
    )


def _row_line(name: str, row: int, values: list[int], written: list[bool], columns: tuple[str, ...] | None) -> str:
    """One row of a 2-D buffer; a work_info_set row as ``work N: column=value ...``; unwritten cells as ``?``."""
    cells = [str(v) if w else "?" for v, w in zip(values, written)]
    if columns is None:
        return f"{name} row {row}: {' '.join(cells)}"
    named = [f"{c}={format_cell(c, int(v)) if w else '?'}" for c, v, w in zip(columns, values, written)]
    return f"work {row}: {' '.join(named)}"


def _flat_rows(label: str, values: torch.Tensor, mask: torch.Tensor, ends: int | None, *, masked: bool) -> list[str]:
    """``label[a:b]: v v v`` per chunk of :data:`FLAT_PER_LINE` values; chunks with nothing written are left out
    (``masked``: unwritten values shown as ``?``)."""
    size = values.numel()
    padded = torch.zeros(-(-size // FLAT_PER_LINE) * FLAT_PER_LINE, dtype=torch.bool)
    padded[:size] = mask
    chunks = padded.reshape(-1, FLAT_PER_LINE).any(dim=1).nonzero().reshape(-1)
    kept, left_out = _ends(chunks.numel(), ends)
    lines = []
    for chunk in chunks[kept].tolist():
        start, stop = chunk * FLAT_PER_LINE, min(chunk * FLAT_PER_LINE + FLAT_PER_LINE, size)
        cells = [str(v) if w or not masked else "?" for v, w in zip(values[start:stop].tolist(), mask[start:stop].tolist())]
        lines.append(f"{label}[{start}:{stop}]: {' '.join(cells)}")
    if left_out is not None:
        omitted = chunks[left_out[0] : left_out[1]]
        elements = (omitted.reshape(-1, 1) * FLAT_PER_LINE + torch.arange(FLAT_PER_LINE)).reshape(-1)
        elements = elements[elements < size]
        lines.insert(left_out[0], _left_out(label, elements, values, mask))
    return lines
