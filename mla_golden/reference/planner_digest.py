"""A digest of an aiter tree's planner sources by meaning, not text.

Two aiter commits plan alike when their planner sources mean the same: the C++
planner (``csrc/kernels/mla/metadata.cu`` and ``csrc/kernels/mla/metadata/*``)
compared without comments and formatting, and the Python side of the two ops
in ``aiter/ops/attention.py`` (op wrappers, compiled bindings, sizing helpers
and the module functions they call) compared as syntax trees without
annotations, docstrings, bare constants (``...``) and rewrites that change
nothing (``int(math.ceil(x))`` is ``math.ceil(x)``). Release tags that only
reformat or re-annotate a ported version's planner (v0.1.17-longctx .. v0.1.19
against aded0f84) then map onto it. ``tools/aiter_oracle/tags.py`` uses it
over git history; ``mla-golden versions --aiter`` over a directory.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from mla_golden.reference.versions import PlannerVersion, versions
from mla_golden.schema import ATTENTION_PY, CPP_DIR, CPP_FILE

#: Bumped whenever the normalisation changes, so stored digests are never compared across rules.
NORMALISATION = 1
#: The ported versions' digests (commit -> digest), written by tools/aiter_oracle/tags.py.
DIGESTS_FILE = Path(__file__).with_name("planner_digests.json")
#: The two ops' entry points in attention.py; the functions they call are followed from here.
PY_ROOTS = (
    "get_mla_metadata_v1",
    "_get_mla_metadata_v1_impl",
    "get_mla_metadata_info_v1",
    "get_ps_metadata_v1",
    "get_ps_metadata_info_v1",
)

# C++ tokens: string and char literals (kept whole), comments (dropped), identifiers and
# numbers, any other single character. Whitespace falls between tokens and is dropped.
_CPP_TOKEN = re.compile(
    r'(?P<str>"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')'
    r"|(?P<comment>//[^\n]*|/\*.*?\*/)"
    r"|(?P<word>[A-Za-z0-9_.]+)"
    r"|(?P<space>\s+)"
    r"|(?P<other>.)",
    re.DOTALL,
)


def normalise_cpp(source: str) -> str:
    """``source``'s tokens, one space apart: comments, line breaks and indentation no longer count.

    Only the end of a preprocessor directive stays (as a line break): it ends
    a macro, so it means something; a ``\\`` continuation joins the lines.
    """
    tokens: list[str] = []
    line_start, directive = True, False
    for match in _CPP_TOKEN.finditer(source):
        kind, text = match.lastgroup, match.group()
        if kind == "comment":
            continue
        if kind == "space":
            if "\n" in text:
                if directive and tokens and tokens[-1] == "\\":
                    tokens.pop()  # a continued directive
                    continue
                if directive:
                    tokens.append("\n")
                line_start, directive = True, False
            continue
        directive = directive or (line_start and text == "#")
        line_start = False
        tokens.append(text)
    return " ".join(tokens)


class _Neutral(ast.NodeTransformer):
    """Drops what does not change what the code does: annotations, docstrings, ``...``, ``int(math.ceil(x))``."""

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.returns = None
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | None:
        if node.value is None:
            return None  # a bare declaration does nothing at run time
        return ast.copy_location(ast.Assign(targets=[node.target], value=self.visit(node.value)), node)

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        # docstrings and `...` are bare constants: evaluating them has no effect
        return None if isinstance(node.value, ast.Constant) else self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        # math.ceil already returns an int: int() around it is the identity
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "int"
            and len(node.args) == 1
            and not node.keywords
            and _is_math_ceil(node.args[0])
        ):
            return node.args[0]
        return node


def _is_math_ceil(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "ceil"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "math"
    )


def planner_functions(attention_py: str) -> dict[str, str]:
    """The ops' functions of an ``attention.py`` (by name), each normalised and dumped.

    The roots in :data:`PY_ROOTS` and every module-level function they call,
    decorators included (``compile_ops`` names the compiled module).
    """
    tree = ast.parse(attention_py)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    todo = [name for name in PY_ROOTS if name in defs]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(sub.id for sub in ast.walk(defs[name]) if isinstance(sub, ast.Name) and sub.id in defs)
    return {name: ast.dump(_Neutral().visit(defs[name])) for name in sorted(seen)}


def planner_digest(cpp_sources: Mapping[str, str], attention_py: str | None) -> str:
    """sha256 (hex) over the normalised planner sources.

    ``cpp_sources``: repository path -> text of metadata.cu and every file
    under metadata/; ``attention_py``: the text of ``aiter/ops/attention.py``
    (None when the tree has none).
    """
    cpp = {path: normalise_cpp(text) for path, text in cpp_sources.items()}
    return digest_of(cpp, planner_functions(attention_py) if attention_py is not None else {})


def digest_of(cpp_normalised: Mapping[str, str], functions: Mapping[str, str]) -> str:
    """The digest of sources already normalised: :func:`normalise_cpp` per C++ file, :func:`planner_functions`.

    A reader of git history normalises each file version once and digests many commits from the pieces.
    """
    h = hashlib.sha256(f"normalisation {NORMALISATION}\n".encode())
    for path in sorted(cpp_normalised):
        h.update(f"file {path}\n{cpp_normalised[path]}\n".encode())
    for name in sorted(functions):
        h.update(f"def {name}\n{functions[name]}\n".encode())
    return h.hexdigest()


def is_planner_source(path: str) -> bool:
    """Whether repository path ``path`` is one of the C++ planner sources."""
    return path == CPP_FILE or path.startswith(CPP_DIR + "/")


def tree_digest(root: Path) -> str:
    """The planner digest of an aiter tree on disk (a checkout, or a ``git archive`` of csrc and aiter).

    Raises ValueError naming what is missing when ``root`` holds no planner sources.
    """
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    attention = root / ATTENTION_PY
    for needed in (root / CPP_FILE, attention):
        if not needed.is_file():
            raise ValueError(f"{root}: not an aiter tree with the planner sources ({needed.relative_to(root)} is missing)")
    files = [root / CPP_FILE] + ([p for p in (root / CPP_DIR).rglob("*") if p.is_file()] if (root / CPP_DIR).is_dir() else [])
    cpp = {p.relative_to(root).as_posix(): _read(p) for p in files}
    try:
        return planner_digest(cpp, _read(attention))
    except SyntaxError as error:
        raise ValueError(f"{attention}: not valid Python (line {error.lineno}: {error.msg})") from error


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror})") from error


@cache
def _ported_digests() -> dict[str, str]:
    """Digest -> commit of each ported version, from :data:`DIGESTS_FILE`."""
    if not DIGESTS_FILE.is_file():
        raise ValueError(f"{DIGESTS_FILE} is missing: regenerate it with tools/aiter_oracle/tags.py")
    data = json.loads(DIGESTS_FILE.read_text(encoding="utf-8"))
    if data.get("normalisation") != NORMALISATION:
        raise ValueError(
            f"{DIGESTS_FILE.name} holds digests of normalisation {data.get('normalisation')}, this is "
            f"{NORMALISATION}: regenerate it with tools/aiter_oracle/tags.py"
        )
    return {digest: commit for commit, digest in data["versions"].items()}


def ported_version(digest: str) -> PlannerVersion | None:
    """The ported version whose planner has ``digest`` (of :func:`tree_digest`), or None when none has."""
    commit = _ported_digests().get(digest)
    return next((v for v in versions() if v.commit == commit), None)
