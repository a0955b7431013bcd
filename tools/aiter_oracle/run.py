"""aiter oracle: conformance records from a host build of an aiter checkout's planners.

    python tools/aiter_oracle/run.py --aiter AITER_CHECKOUT --cases CASES.jsonl --out RECORDS.jsonl

Each line of CASES holds ``case_id``, ``op``, ``device``, ``env``, ``call`` (and
optionally ``buffers``) as in ../shared/conformance/README.md; RECORDS gets one
full record per case. See README.md next to this file.
"""

from __future__ import annotations
from helpers.repo import TESTS

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(TESTS))

from oracle import CaseError, Oracle  # noqa: E402

from mla_golden.aiter_build.build import build  # noqa: E402
from mla_golden.aiter_build.tree import cache_root, from_path  # noqa: E402
from mla_golden.errors import AiterSourceError  # noqa: E402


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
    parser.add_argument("--cache", type=Path, default=None, help="build cache folder (default: mla-golden's, see MLA_GOLDEN_CACHE)")
    args = parser.parse_args(argv)

    if not args.cases.is_file():
        parser.error(f"--cases {args.cases}: no such file")
    try:
        tree = from_path(args.aiter)
        commit = args.commit or tree.commit
        if not commit:
            parser.error(f"--aiter {args.aiter}: cannot tell its commit (not a git checkout); pass --commit")
        cases = read_cases(args.cases)
        harness = build(tree.csrc_root, args.cache or cache_root() / "builds")
    except (CaseError, AiterSourceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    oracle = Oracle(tree.py_root, harness, commit, tree.csrc_root)
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
