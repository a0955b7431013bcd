"""Map aiter release tags to planner versions: writes mla_golden/reference/aiter_tags.json.

    python tools/aiter_oracle/tags.py [--repo AITER_REPO] [--out PATH]

A planner version is what the planner's sources mean at a commit
(``mla_golden.reference.planner_digest``): every file under
csrc/kernels/mla/metadata/ plus csrc/kernels/mla/metadata.cu without comments
and formatting, and the Python functions of the two ops in
aiter/ops/attention.py (the op wrappers, their compiled bindings, the sizing
helpers and the attention.py functions these call) parsed, without annotations,
docstrings and ``...``. Two commits with the same digest plan identically. Each
release tag (``v*``) gets its commit, commit date, digest, and which ported
version (``mla_golden.reference.versions()``) has the same digest; the ported
versions' own digests go to planner_digests.json next to it, for
``mla-golden versions --aiter``. Reads the bare mirror with git; never needs a
work tree.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from mla_golden.aiter_build.repo import AiterRepo
from mla_golden.files import atomic_write
from mla_golden.reference import versions
from mla_golden.reference.planner_digest import DIGESTS_FILE, NORMALISATION

ROOT = TESTSs[2]
DEFAULT_OUT = ROOT / "mla_golden" / "reference" / "aiter_tags.json"
RELEASE_TAG = re.compile(r"^v\d+\.\d+")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def tag_map(repo: AiterRepo, ported: dict[str, str]) -> list[dict[str, str | None]]:
    """One row per release tag; ``ported``: digest -> the name of the ported version with it."""
    rows: list[dict[str, str | None]] = []
    for tag in git(repo.path, "tag", "-l").split():
        if not RELEASE_TAG.match(tag):
            continue
        commit = repo.commit_sha(tag)
        date = repo.commit(commit).date
        digest = repo.digest(commit)
        rows.append({"tag": tag, "commit": commit, "date": date, "planner_digest": digest, "same_planner_as": ported.get(digest)})
    rows.sort(key=lambda r: (str(r["date"]), str(r["tag"])))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_repo = os.environ.get("MLA_GOLDEN_AITER_REPO")
    p.add_argument(
        "--repo", type=Path, default=default_repo, required=default_repo is None,
        help="git repository of ROCm/aiter (bare is fine; default $MLA_GOLDEN_AITER_REPO)",
    )  # fmt: skip
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the tag map; planner_digests.json goes next to it")
    args = p.parse_args(argv)
    if not (args.repo / "HEAD").exists() and not (args.repo / ".git").exists():
        p.error(f"--repo {args.repo}: not a git repository")
    repo = AiterRepo(args.repo)
    digests = {v.commit: repo.digest(v.commit) for v in versions()}
    ported: dict[str, str] = {}
    for v in versions():
        ported.setdefault(digests[v.commit], v.name)
    rows = tag_map(repo, ported)
    atomic_write(args.out, json.dumps(rows, indent=1) + "\n")
    digests_out = args.out.with_name(DIGESTS_FILE.name)
    atomic_write(digests_out, json.dumps({"normalisation": NORMALISATION, "versions": digests}, indent=1) + "\n")
    same = sum(1 for r in rows if r["same_planner_as"])
    print(f"{len(rows)} release tags, {len({r['planner_digest'] for r in rows})} planner versions, "
          f"{same} tags carry a ported version -> {args.out}, {digests_out}", file=sys.stderr)  # fmt: skip
    for r in rows:
        print(f"{r['tag']:<16} {r['date']} {str(r['commit'])[:10]} {str(r['planner_digest'])[:12]} {r['same_planner_as'] or ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
