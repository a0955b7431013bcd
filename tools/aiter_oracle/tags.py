"""Map aiter release tags to planner versions: writes mla_golden/reference/aiter_tags.json.

    python tools/aiter_oracle/tags.py [--repo /work/.mirror/ROCm+aiter/repo] [--out PATH]

A planner version is the content of the planner's sources at a commit: every
file under csrc/kernels/mla/metadata/ plus csrc/kernels/mla/metadata.cu, and
the source text of the Python functions of the two ops in aiter/ops/attention.py
(the op wrappers, their compiled bindings, the sizing helpers and the
attention.py functions these call), not the rest of that file. Two commits
with the same digest plan identically. Each release tag (``v*``) gets its
commit, commit date, digest, and which supported version (if any) has the
same digest. Reads the bare mirror with git; never needs a work tree.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_REPO = Path("/work/.mirror/ROCm+aiter/repo")
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "mla_golden" / "reference" / "aiter_tags.json"
#: the planner versions the reference and the conformance data support, by their short names
SUPPORTED = ("33d168a0", "aded0f84", "620287969c", "e4048607")
CPP_PATHS = ("csrc/kernels/mla/metadata.cu", "csrc/kernels/mla/metadata")
ATTENTION_PY = "aiter/ops/attention.py"
PY_ROOTS = (
    "get_mla_metadata_v1",
    "_get_mla_metadata_v1_impl",
    "get_mla_metadata_info_v1",
    "get_ps_metadata_v1",
    "get_ps_metadata_info_v1",
)
RELEASE_TAG = re.compile(r"^v\d+\.\d+")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def planner_functions(source: str) -> list[tuple[str, str]]:
    """(name, source text incl. decorators) of the ops' functions and the module functions they call."""
    tree = ast.parse(source)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    todo = [name for name in PY_ROOTS if name in defs]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for sub in ast.walk(defs[name]):
            if isinstance(sub, ast.Name) and sub.id in defs and sub.id not in seen:
                todo.append(sub.id)
    lines = source.splitlines(keepends=True)
    out = []
    for name in sorted(seen):
        node = defs[name]
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        out.append((name, "".join(lines[first - 1 : node.end_lineno])))
    return out


def planner_digest(repo: Path, commit: str) -> str:
    """sha256 (hex) over the planner sources of ``commit``."""
    h = hashlib.sha256()
    listing = git(repo, "ls-tree", "-r", commit, "--", *CPP_PATHS)
    for line in sorted(listing.splitlines(), key=lambda row: row.split("\t", 1)[1]):
        meta, path = line.split("\t", 1)
        blob = meta.split()[2]
        h.update(f"file {path} {blob}\n".encode())  # the blob id is the content's hash
    try:
        source = git(repo, "show", f"{commit}:{ATTENTION_PY}")
    except subprocess.CalledProcessError:
        source = ""
    for name, text in planner_functions(source) if source else []:
        h.update(f"def {name}\n".encode())
        h.update(text.encode())
    return h.hexdigest()


def tag_map(repo: Path) -> list[dict[str, str | None]]:
    supported = {short: planner_digest(repo, git(repo, "rev-parse", f"{short}^{{commit}}").strip()) for short in SUPPORTED}
    by_digest: dict[str, str] = {}
    for short, digest in supported.items():
        by_digest.setdefault(digest, short)
    rows: list[dict[str, str | None]] = []
    for tag in git(repo, "tag", "-l").split():
        if not RELEASE_TAG.match(tag):
            continue
        commit = git(repo, "rev-parse", f"{tag}^{{commit}}").strip()
        date = git(repo, "log", "-1", "--format=%cs", commit).strip()
        digest = planner_digest(repo, commit)
        rows.append(
            {"tag": tag, "commit": commit, "date": date, "planner_digest": digest, "same_planner_as": by_digest.get(digest)}
        )
    rows.sort(key=lambda r: (str(r["date"]), str(r["tag"])))
    return rows


def write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", type=Path, default=DEFAULT_REPO, help="git repository of ROCm/aiter (bare is fine)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args(argv)
    if not (args.repo / "HEAD").exists() and not (args.repo / ".git").exists():
        p.error(f"--repo {args.repo}: not a git repository")
    rows = tag_map(args.repo)
    write_atomic(args.out, json.dumps(rows, indent=1) + "\n")
    same = sum(1 for r in rows if r["same_planner_as"])
    print(f"{len(rows)} release tags, {len({r['planner_digest'] for r in rows})} planner versions, "
          f"{same} tags carry a supported version -> {args.out}", file=sys.stderr)
    for r in rows:
        print(f"{r['tag']:<16} {r['date']} {str(r['commit'])[:10]} {str(r['planner_digest'])[:12]} {r['same_planner_as'] or ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
