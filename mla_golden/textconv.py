"""A golden as stable text, one line per row, for ``git diff`` (``mla-golden textconv``).

Goldens are binary, so a pull request shows "Binary files differ". Git runs a
textconv command on both sides of a changed file and diffs the text; for that
diff to show what changed and nothing else, the text is a pure function of
the call: params, device, env, inputs, and per output buffer the runs of
elements written and one line per row (a work item, a reduce group's map
entry, or 16 values of a flat buffer). Nothing that changes when the same
call is recorded again (time, torch version, content digest) is printed.
"""

from __future__ import annotations

from typing import Any

import torch

from mla_golden.call import Call
from mla_golden.planner_id import planner_label
from mla_golden.sanitize import inline
from mla_golden.schema import OUTPUTS, POINTER_OUTPUT, format_cell, schema_for
from mla_golden.store import Golden

#: Values per line of a flat (1-D) buffer or input.
FLAT_PER_LINE = 16


def golden_text(golden: Golden) -> str:
    """The text form of a golden: a header, then one line per scalar, input chunk and output row."""
    call = golden.call
    lines = [f"golden {golden.key}", f"op {call.op}", f"planner {planner_label(call.provenance)}"]
    lines += [f"param {name} = {_value(value)}" for name, value in sorted(call.params.items())]
    lines += [f"device {name} = {_value(value)}" for name, value in sorted(call.device.items())]
    lines += [f"env {name} = {_value(value)}" for name, value in sorted(call.env.items())]
    for name, tensor in call.inputs.items():
        lines += _flat_rows(f"input {name}", tensor.reshape(-1).tolist(), None)
    if call.error is not None:
        lines.append(f"error {call.error}")
    else:
        for name in OUTPUTS:
            if name in call.buffers:
                lines += _buffer_lines(call, name)
    return "".join(f"{inline(line)}\n" for line in lines)  # a key or error holding a newline stays on its line


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _runs(mask: list[bool]) -> str:
    """Written positions as half-open runs: ``[0, 120) [130, 131)``; ``none`` when nothing was written."""
    runs, start = [], None
    for i, written in enumerate([*mask, False]):
        if written and start is None:
            start = i
        elif not written and start is not None:
            runs.append(f"[{start}, {i})")
            start = None
    return " ".join(runs) or "none"


def _buffer_lines(call: Call, name: str) -> list[str]:
    spec = call.buffers[name]
    values, written = call.outputs.get(name), call.written.get(name)
    head = f"buffer {name} {spec.get('dtype')} {list(spec.get('shape', []))}"
    if values is None or written is None:
        return [f"{head} not kept"]
    if name == POINTER_OUTPUT:  # raw device pointers: they differ on every run and are never compared
        return [f"{head} written {int(written.sum())} (device pointers, not shown)"]
    if values.dim() == 2:
        rows_written = written.any(dim=1).tolist()
        lines = [f"{head} written rows {_runs(rows_written)}"]
        columns = schema_for(call.op).work_columns if name == "work_info_set" else None
        for row, any_written in enumerate(rows_written):
            if any_written:
                lines.append(_row_line(name, row, values[row], written[row], columns))
        return lines
    flat, mask = values.reshape(-1).tolist(), written.reshape(-1).tolist()
    return [f"{head} written {_runs(mask)}", *_flat_rows(name, flat, mask)]


def _row_line(name: str, row: int, values: torch.Tensor, written: torch.Tensor, columns: tuple[str, ...] | None) -> str:
    """One row of a 2-D buffer; a work_info_set row as ``work N: column=value ...``; unwritten cells as ``?``."""
    cells = [str(v) if w else "?" for v, w in zip(values.tolist(), written.tolist())]
    if columns is None:
        return f"{name} row {row}: {' '.join(cells)}"
    named = [f"{c}={format_cell(c, int(v)) if w else '?'}" for c, v, w in zip(columns, values.tolist(), written.tolist())]
    return f"work {row}: {' '.join(named)}"


def _flat_rows(label: str, values: list[int], mask: list[bool] | None) -> list[str]:
    """``label[a:b]: v v v`` per chunk of :data:`FLAT_PER_LINE` values; chunks with nothing written are left out."""
    lines = []
    for start in range(0, len(values), FLAT_PER_LINE):
        chunk = range(start, min(start + FLAT_PER_LINE, len(values)))
        if mask is not None and not any(mask[i] for i in chunk):
            continue
        cells = [str(values[i]) if mask is None or mask[i] else "?" for i in chunk]
        lines.append(f"{label}[{chunk.start}:{chunk.stop}]: {' '.join(cells)}")
    return lines
