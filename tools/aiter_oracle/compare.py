"""Compare the oracle's records with expected conformance records (same case_ids).

    python tools/aiter_oracle/compare.py ORACLE.jsonl EXPECTED.jsonl [--side old]

Rules (../shared/conformance/README.md, "Checking an implementation"): the
result and error message (and source, where both records name it) must agree; buffer shapes must agree; for every output
except ``work_metadata_ptrs`` the elements outside both records' ``indeterminate``
runs must have the same written mask and the same values; writes past a
buffer's end must agree. A record marked ``indeterminate_record`` on the
expected side must be marked so on the oracle side, and then no element is
compared. ``--side old`` compares with the ``old`` side of cross_version records
(records whose old side equals the new one carry no ``old``: then the new
commit's record from --new-records is the expectation).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, cast


def _mask(runs: list[list[int]], n: int) -> list[bool]:
    m = [False] * n
    for a, b in runs:
        for i in range(a, min(b, n)):
            m[i] = True
    return m


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def differences(mine: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """Human-readable reasons the two records disagree (empty: they agree)."""
    for name, spec in expected.get("buffers", {}).items():
        if isinstance(spec, dict) and "shape" in spec:
            got = mine.get("buffers", {}).get(name, {})
            if list(got.get("shape", [])) != list(spec["shape"]):
                return [f"buffer {name}: shape {got.get('shape')} != {spec['shape']}"]
    if mine["result"] != expected["result"]:
        return [f"result {mine['result']} != {expected['result']}"]
    if mine["result"] == "error":
        a, b = mine["error"]["message"], expected["error"]["message"]
        if a != b:
            return [f"error message {a!r} != {b!r}"]
        sa, sb = mine["error"].get("source"), expected["error"].get("source")
        return [] if None in (sa, sb) or sa == sb else [f"error source {sa} != {sb}"]
    out = []
    for name, exp in expected["outputs"].items():
        got = mine["outputs"].get(name)
        if got is None:
            out.append(f"{name}: missing")
            continue
        if list(got["shape"]) != list(exp["shape"]):
            out.append(f"{name}: shape {got['shape']} != {exp['shape']}")
            continue
        if exp.get("skipped"):
            if got.get("written") != exp.get("written"):
                out.append(f"{name}: written {got.get('written')} != {exp.get('written')}")
            continue
        if expected.get("indeterminate_record"):
            continue
        n = _numel(exp["shape"])
        skip = [x or y for x, y in zip(_mask(exp.get("indeterminate", []), n), _mask(got.get("indeterminate", []), n))]
        we, wg = _mask(exp.get("written", []), n), _mask(got.get("written", []), n)
        ve = exp.get("values", []) + [0] * (n - len(exp.get("values", [])))
        vg = got.get("values", []) + [0] * (n - len(got.get("values", [])))
        bad_mask = [i for i in range(n) if not skip[i] and we[i] != wg[i]]
        bad_vals = [i for i in range(n) if not skip[i] and we[i] and wg[i] and ve[i] != vg[i]]
        if bad_mask:
            out.append(f"{name}: written mask differs at {len(bad_mask)} elements, first {bad_mask[:5]}")
        if bad_vals:
            i = bad_vals[0]
            out.append(f"{name}: {len(bad_vals)} values differ, first [{i}] {vg[i]} != {ve[i]}")
        be = (exp.get("written_beyond_end", []), exp.get("values_beyond_end", []))
        bg = (got.get("written_beyond_end", []), got.get("values_beyond_end", []))
        if be != bg:
            out.append(f"{name}: beyond-end writes {bg} != {be}")
    if expected.get("indeterminate_record") and not mine.get("indeterminate_record"):
        out.append("expected indeterminate_record, oracle found the result defined")
    return out


def load(path: Path) -> dict[str, dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return {r["case_id"]: r for r in map(json.loads, filter(str.strip, fh))}


def expected_side(rec: dict[str, Any], side: str, new_records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if side == "new":
        return rec
    if "old" in rec:
        return cast(dict[str, Any], rec["old"])
    same = dict(new_records[rec["case_id"]])
    if same["result"] == "error":  # the same check, but at the old commit's own line
        same["error"] = {"message": same["error"]["message"]}
    return same


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("oracle", type=Path)
    p.add_argument("expected", type=Path)
    p.add_argument("--side", choices=("new", "old"), default="new")
    p.add_argument("--new-records", type=Path, nargs="*", default=[], help="per-version records of the new commit")
    args = p.parse_args(argv)
    mine, expected = load(args.oracle), load(args.expected)
    new_records: dict[str, dict[str, Any]] = {}
    for path in args.new_records:
        new_records.update(load(path))
    reasons: Counter[str] = Counter()
    matched = 0
    missing = [cid for cid in expected if cid not in mine]
    for cid, rec in expected.items():
        if cid not in mine:
            continue
        diffs = differences(mine[cid], expected_side(rec, args.side, new_records))
        if diffs:
            print(cid, "; ".join(diffs))
            reasons[diffs[0].split(":")[0]] += 1
        else:
            matched += 1
    print(f"matched {matched} / {len(expected)} (oracle lacks {len(missing)})")
    return 0 if matched == len(expected) else 1


if __name__ == "__main__":
    sys.exit(main())
