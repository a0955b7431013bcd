"""aiter oracle: conformance records from a host build of an aiter checkout's planners.

    python tools/aiter_oracle/run.py --aiter AITER_CHECKOUT --cases CASES.jsonl --out RECORDS.jsonl

Each line of CASES holds ``case_id``, ``op``, ``device``, ``env``, ``call`` (and
optionally ``buffers``) as in ../shared/conformance/README.md; RECORDS gets one
full record per case. See README.md next to this file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build import BuildError, build  # noqa: E402
from oracle import CaseError, Oracle  # noqa: E402

DEFAULT_CACHE = Path(os.environ.get("AITER_ORACLE_CACHE", Path(tempfile.gettempdir()) / "aiter-oracle-cache"))


def checkout_commit(checkout: Path) -> str | None:
    """HEAD of a git checkout, else the commit ``git archive`` left in ``.aiter_commit``, else None."""
    proc = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    if proc.returncode == 0 and (checkout / ".git").exists():
        return proc.stdout.strip()
    marker = checkout / ".aiter_commit"
    return marker.read_text().strip() if marker.is_file() else None


def read_cases(path: Path) -> list[dict]:
    cases = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                case = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CaseError(f"{path}:{lineno}: not JSON ({exc.msg})") from exc
            if not isinstance(case, dict):
                raise CaseError(f"{path}:{lineno}: a case must be a JSON object")
            cases.append(case)
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aiter", required=True, type=Path, help="local checkout of ROCm/aiter (any commit)")
    parser.add_argument("--cases", required=True, type=Path, help="JSON Lines of cases")
    parser.add_argument("--out", required=True, type=Path, help="JSON Lines of records to write")
    parser.add_argument("--commit", help="the checkout's full commit (default: git rev-parse HEAD, or .aiter_commit)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="build cache folder")
    args = parser.parse_args(argv)

    if not args.aiter.is_dir():
        parser.error(f"--aiter {args.aiter}: not a folder")
    if not args.cases.is_file():
        parser.error(f"--cases {args.cases}: no such file")
    commit = args.commit or checkout_commit(args.aiter)
    if not commit:
        parser.error(f"--aiter {args.aiter}: cannot tell its commit (not a git checkout); pass --commit")
    try:
        cases = read_cases(args.cases)
        harness = build(args.aiter, args.cache)
    except (CaseError, BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    oracle = Oracle(args.aiter.resolve(), harness, commit)
    tmp = args.out.with_name(args.out.name + ".tmp")
    failures = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for i, case in enumerate(cases, 1):
            try:
                rec = oracle.record(case)
            except CaseError as exc:
                print(f"error: {exc}", file=sys.stderr)
                failures += 1
                continue
            fh.write(json.dumps(rec, separators=(", ", ": ")) + "\n")
            if i % 50 == 0:
                print(f"{i}/{len(cases)} cases", file=sys.stderr)
    tmp.replace(args.out)
    print(f"wrote {len(cases) - failures} records to {args.out}" + (f" ({failures} cases failed)" if failures else ""), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
