"""Build one aiter tree's metadata planners for the host (g++ + the SIMT emulation in emu/).

The checkout's csrc/kernels/mla/metadata.cu (with everything it includes from
csrc/kernels/mla/metadata/ and csrc/include/) is copied into a build folder with
two mechanical rewrites that keep every line number: kernel launches
``k<<<grid, block, lds, stream>>>(args)`` become ``::emu::launch(...)`` calls and
``extern __shared__ T name[]`` becomes a pointer to the emulated LDS. A generated
``harness.cpp`` then calls the commit's own ``get_mla_metadata_v1`` /
``get_ps_metadata_v1`` with the C++ parameter list parsed from metadata.cu.
Builds are cached by a digest of everything that goes into them, built once
under a file lock (concurrent processes wait for the first) and published by
renaming a finished folder into place; what a build killed mid-way left is
removed by the next one (:mod:`.scratch`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mla_golden.aiter_build import scratch, tree
from mla_golden.errors import AiterSourceError
from mla_golden.render.sanitize import inline
from mla_golden.schema import CPP_DIR, CPP_FILE

HERE = Path(__file__).resolve().parent
EMU_DIR = HERE / "emu"
#: The compiler; ``CXX`` names another g++-compatible one.
CXX_ENV = "CXX"
OPT_LEVEL = "-O2"
OPS = ("get_mla_metadata_v1", "get_ps_metadata_v1")
INCLUDE_DIR = "csrc/include"


BuildError = AiterSourceError  # the name tools/aiter_oracle knows

@dataclass(frozen=True)
class CppParam:
    """One parameter of a C++ planner entry point, classified for the harness."""

    name: str
    kind: str  # "tensor" | "int" | "enum" | "bool" | "opt_scalar_type" | "opt_int" | "scalar_type"
    ctype: str = ""


@dataclass(frozen=True)
class Harness:
    """A compiled harness and the C++ signatures it calls."""

    binary: Path
    signatures: dict[str, tuple[CppParam, ...]]
    #: this call compiled it (False: it was in the cache, or another process built it meanwhile)
    compiled: bool = False


# --------------------------------------------------------------------------------------------
# source rewrites


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _matching(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just past the bracket that closes text[start] (== open_ch)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    raise BuildError(f"unbalanced {open_ch}{close_ch} at offset {start}")


def _kernel_name_start(text: str, end: int) -> int:
    """Start of the (possibly templated) kernel name ending just before ``end``."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if text[i - 1] == ">":  # template arguments
        depth = 0
        while i > 0:
            i -= 1
            if text[i] == ">":
                depth += 1
            elif text[i] == "<":
                depth -= 1
                if depth == 0:
                    break
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_:"):
        i -= 1
    return i


def rewrite_launches(text: str) -> str:
    """``k<<<g, b, lds, s>>>(args);`` -> ``::emu::launch(g, b, lds, [&]() { k(args); });``."""
    out = []
    pos = 0
    while True:
        open_at = text.find("<<<", pos)
        if open_at < 0:
            out.append(text[pos:])
            return "".join(out)
        close_at = text.find(">>>", open_at)
        if close_at < 0:
            raise BuildError(f"a kernel launch's '<<<' at offset {open_at} has no '>>>'")
        name_start = _kernel_name_start(text, open_at)
        name = text[name_start:open_at]
        config = text[open_at + 3 : close_at]
        paren = close_at + 3
        while text[paren].isspace():
            paren += 1
        args_end = _matching(text, paren, "(", ")")
        args = text[paren:args_end]
        parts = _split_top_level(config)
        while len(parts) < 4:
            parts.append("0")
        grid, block, lds = parts[0], parts[1], parts[2]
        out.append(text[pos:name_start])
        out.append(f"::emu::launch(dim3({grid}), dim3({block}), (size_t)({lds}), [&]() {{ {name.strip()}{args}; }})")
        out.append("\n" * text.count("\n", name_start, paren))  # keep every later line where it was
        pos = args_end


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p.strip() for p in parts]


_EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+([\w:]+)\s+(\w+)\s*\[\s*\]\s*;")


def rewrite_shared(text: str) -> str:
    """Dynamic LDS (``extern __shared__ T p[];``) -> a pointer to the emulated LDS."""
    return _EXTERN_SHARED.sub(lambda m: f"{m.group(1)}* {m.group(2)} = reinterpret_cast<{m.group(1)}*>(::emu::lds());", text)


# --------------------------------------------------------------------------------------------
# signatures


def parse_signature(source: str, func: str) -> tuple[CppParam, ...]:
    """The parameter list of ``void func(...)`` as defined (with a body) in ``source``."""
    clean = _strip_comments(source)
    for m in re.finditer(rf"\bvoid\s+{func}\s*\(", clean):
        open_at = m.end() - 1
        close_at = _matching(clean, open_at, "(", ")")
        rest = clean[close_at:].lstrip()
        if not rest.startswith("{"):
            continue
        params = []
        for raw in _split_top_level(clean[open_at + 1 : close_at - 1]):
            decl = raw.split("=")[0].strip()
            names = re.findall(r"(\w+)\s*$", decl)
            if not names:
                raise BuildError(f"{CPP_FILE}: {func} has a parameter without a name: {raw!r}")
            name = names[0]
            ctype = decl[: -len(name)].strip()
            params.append(CppParam(name, _classify(ctype, func), re.sub(r"\bconst\b|&", "", ctype).strip()))
        return tuple(params)
    raise BuildError(f"{CPP_FILE}: no definition of {func}")


_KINDS = (
    ("tensor", r"(torch::|at::)?Tensor|aiter_tensor_t"),
    ("opt_scalar_type", r"std::optional<(at::|c10::|torch::)?ScalarType>"),
    ("opt_int", r"std::optional<(int64_t|int32_t|int|long)>"),
    ("scalar_type", r"(at::|c10::|torch::)?ScalarType"),
    ("bool", r"bool"),
    ("int", r"(int64_t|int32_t|int|long|long long|size_t)"),
    ("enum", r"[A-Z]\w*"),  # e.g. MlaVersion, passed as its value
)


def _classify(ctype: str, func: str) -> str:
    bare = re.sub(r"\s+", " ", re.sub(r"\bconst\b|&", " ", ctype)).strip()
    bare = re.sub(r"\s*([<>:])\s*", r"\1", bare)
    for kind, pattern in _KINDS:
        if re.fullmatch(pattern, bare):
            return kind
    raise BuildError(f"{func}: parameter type {ctype!r} is not supported by the harness")


# --------------------------------------------------------------------------------------------
# harness


def _harness_source(signatures: dict[str, tuple[CppParam, ...]], tensor_api: str) -> str:
    calls = []
    for op, params in signatures.items():
        args, setup = [], []
        for i, p in enumerate(params):
            if p.kind == "tensor":
                setup.append(f"auto& a{i} = emu_h::tensor_arg<{tensor_api}>(c, {i});")
                args.append(f"a{i}")
            elif p.kind == "int":
                args.append(f"static_cast<int32_t>(c.ints.at({i}))")
            elif p.kind == "enum":
                args.append(f"static_cast<{p.ctype}>(c.ints.at({i}))")
            elif p.kind == "bool":
                args.append(f"c.ints.at({i}) != 0")
            elif p.kind == "opt_int":
                args.append(f"emu_h::opt_int(c, {i})")
            elif p.kind == "opt_scalar_type":
                args.append(f"emu_h::opt_scalar_type(c, {i})")
            elif p.kind == "scalar_type":
                args.append(f"*emu_h::opt_scalar_type(c, {i})")
        body = "\n        ".join(setup)
        calls.append(
            f"""    if(c.op == "{op}")
    {{
        {body}
        {op}({", ".join(args)});
        return;
    }}"""
        )
    prelude = '#define EMU_TORCH_API\n#include "torch_shim.hpp"\n' if tensor_api == "at::Tensor" else '#include "aiter_tensor.h"\n'
    return (
        prelude + '#include "harness_runtime.hpp"\n'
        '#include "csrc/kernels/mla/metadata.cu"\n\n'
        "void emu_h::dispatch(emu_h::Case& c)\n{\n" + "\n".join(calls) + '\n    throw std::runtime_error("op not built: " + c.op);\n}\n\n'
        "int main() { return emu_h::main_loop(); }\n"
    )


def hash_file(h: hashlib._Hash, name: str, data: bytes) -> None:
    """Add one file to digest ``h`` as its name and content, each behind its length.

    Lengths keep the stream unambiguous: with bare concatenation, a file whose
    content is another file's name and content hashes like the two files.
    """
    encoded = name.encode()
    h.update(b"%d:%s%d:" % (len(encoded), encoded, len(data)))
    h.update(data)


def _digest(checkout: Path, files: list[Path]) -> str:
    """What a build is cached by: the tree's sources (path relative to it), the emulation and this file."""
    h = hashlib.sha256()
    for path in sorted(files):
        hash_file(h, str(path.relative_to(checkout)), tree.read_bytes(path))
    for path in sorted(EMU_DIR.rglob("*")):
        if path.is_file():
            hash_file(h, f"emu/{path.relative_to(EMU_DIR)}", path.read_bytes())
    hash_file(h, "build.py", Path(__file__).read_bytes())
    return h.hexdigest()[:16]


def compiler() -> str:
    """The C++ compiler to build with; AiterSourceError when there is none."""
    name = os.environ.get(CXX_ENV) or "g++"
    found = shutil.which(name)
    if found is None:
        raise AiterSourceError(
            f"no C++ compiler: {name!r} is not on PATH (aiter-src builds aiter's planner with g++; "
            f"install it or set {CXX_ENV})"
        )
    return found


def announce(checkout: Path) -> None:
    """Say on stderr, before a cold build, that the wait ahead is minutes: not a hang, and once per tree (later
    uses find the build in the cache). stdout stays the caller's; the CLI prints it under ``--quiet`` too."""
    print(
        f"mla-golden: building aiter's planner of {inline(str(checkout))} for the host: a few minutes, once "
        "(later uses find it in the cache)",
        file=sys.stderr,
        flush=True,
    )


def build(checkout: Path, cache_dir: Path, *, quiet: bool = False) -> Harness:
    """Compile (or reuse) the host harness for the checkout's planner sources; a cold build is announced on stderr
    (:func:`announce`) unless ``quiet`` (a caller that reports its builds itself)."""
    from filelock import FileLock

    checkout = checkout.resolve()
    cu = checkout / CPP_FILE
    if not cu.is_file():
        raise BuildError(f"{checkout}: no {CPP_FILE} (not an aiter tree with the MLA metadata planners)")
    sources = [cu, *sorted((checkout / CPP_DIR).glob("*.cuh"))]
    # The emulation's own headers replace the checkout's of the same name (a quoted include
    # finds its neighbour first, so the shadowed ones are not copied at all).
    shimmed = {p.name for p in EMU_DIR.iterdir()}
    headers = sorted(p for p in (checkout / INCLUDE_DIR).glob("*.h") if p.name not in shimmed)
    digest = _digest(checkout, sources + headers)
    out_dir = cache_dir / digest
    binary = out_dir / "harness"
    cu_text = tree.read_text(cu)
    signatures = {op: parse_signature(cu_text, op) for op in OPS if re.search(rf"\bvoid\s+{op}\s*\(", cu_text)}
    if binary.is_file():
        return Harness(binary, signatures)
    cxx = compiler()
    if not quiet:
        announce(checkout)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir / f"{digest}.lock")):
        if binary.is_file():  # another process (or thread) built it while we waited
            return Harness(binary, signatures)
        scratch.sweep(cache_dir)  # what builds killed mid-way left
        _compile(cxx, checkout, cu_text, sources, headers, signatures, cache_dir, out_dir)
    return Harness(binary, signatures, compiled=True)


def _compile(
    cxx: str,
    checkout: Path,
    cu_text: str,
    sources: list[Path],
    headers: list[Path],
    signatures: dict[str, tuple[CppParam, ...]],
    cache_dir: Path,
    out_dir: Path,
) -> None:
    """Build into a fresh folder and rename it to ``out_dir`` once the binary is there."""
    work = scratch.make(cache_dir, out_dir.name)
    try:
        src_root = work / "src"
        for path in sources:
            dest = src_root / path.relative_to(checkout)
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                dest.write_text(rewrite_shared(rewrite_launches(tree.read_text(path))))
            except BuildError as exc:
                raise BuildError(f"{path}: {exc}") from None
        for path in headers:
            dest = src_root / path.relative_to(checkout)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
        tensor_api = "aiter_tensor_t" if "aiter_tensor_t" in cu_text else "at::Tensor"
        (src_root / "harness.cpp").write_text(_harness_source(signatures, tensor_api))
        cmd = [
            cxx,
            "-std=c++20",
            OPT_LEVEL,
            "-U_FORTIFY_SOURCE",  # its longjmp check refuses the fibers' switches between stacks
            "-w",
            "-fpermissive",
            f"-I{EMU_DIR}",
            f"-I{src_root / INCLUDE_DIR}",
            f"-I{src_root}",
            "-include",
            "torch_shim.hpp" if tensor_api == "at::Tensor" else "emu_runtime.hpp",
            "-o",
            str(work / "harness"),
            str(src_root / "harness.cpp"),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"{checkout}: {Path(cxx).name} failed to build the planner:\n{proc.stderr[-6000:]}")
        scratch.publish(work, out_dir)  # over a stale half-published folder (no binary) if there is one
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
