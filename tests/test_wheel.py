"""The wheel works outside the repository: built with ``python -m build``, installed into a fresh venv.

The wheel must carry every data file of the package (the case matrix, the
sweep space, the aiter tags the versions read, ``py.typed``): the test lists
them from the source tree, so a new one is checked without an edit here. The
fresh venv takes torch and the other dependencies from this venv's
site-packages through a ``.pth`` line (quick and offline), and mla-golden
only from the wheel; the goldens are copied outside the repository.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from helpers.repo import ROOT

PACKAGE = ROOT / "mla_golden"


def _data_files() -> set[str]:
    """Every file of the package that is not Python source, as a wheel names it."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the sources (a build must leave the checkout alone)."""
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(PACKAGE, src / "mla_golden", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(src)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    [built] = dist.glob("mla_golden-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_carries_every_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = _data_files()
    assert {"mla_golden/py.typed", "mla_golden/matrix.toml", "mla_golden/sweeper/space.toml",
            "mla_golden/reference/aiter_tags.json"} <= expected  # fmt: skip
    assert expected <= names, sorted(expected - names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "mla-golden = mla_golden.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.mark.slow
def test_a_wheel_install_diffs_goldens_outside_the_repository(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # No pip of its own (ensurepip took minutes on a loaded box): this venv's pip puts the wheel, alone, into the
    # fresh one's site-packages (--target never touches this venv's own install of mla-golden).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile", "--disable-pip-version-check",
         "--target", str(site), str(wheel)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    # torch & co. come from this venv through a plain path line (its editable install of mla-golden is not activated there)
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "elsewhere"
    shutil.copytree(ROOT / "goldens", work / "goldens")
    where = subprocess.run([python, "-c", "import mla_golden; print(mla_golden.__file__)"],
                           capture_output=True, text=True, check=True, cwd=work).stdout  # fmt: skip
    assert Path(where.strip()).is_relative_to(venv), where
    # the wheel's console script (--target puts it under site-packages/bin), run by the fresh venv's python
    cli: list[str | Path] = [python, site / "bin" / "mla-golden"]
    runs = {
        "diff --against": [*cli, "diff", "goldens", "--against", "goldens", "--quiet"],
        "versions (reads aiter_tags.json)": [*cli, "versions"],
    }
    for what, args in runs.items():
        run = subprocess.run(args, capture_output=True, text=True, cwd=work)
        assert run.returncode == 0, (what, run.stdout[-2000:], run.stderr[-2000:])
