"""The package stands alone: a wheel installed into a fresh venv runs every command outside the checkout.

The venv has no system site-packages, so nothing of the checkout (the editable install,
corpus/, docs/) can be what answers; pip fetches the runtime dependencies from the
registry, as a user's install does.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip builds from the tracked files only, as a fresh clone would."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    # build from the tracked files only, as a fresh clone would
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    for rel in filter(None, tracked.decode().split("\0")):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist),
                    str(src)], check=True, env=_isolated_env())
    built, = dist.glob("nczarr_conformance-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path) -> Path:
    """A venv without pip of its own: this interpreter's pip installs into it (``pip --python``), as ensurepip's
    copy would, without spending a third of this fixture's time unpacking and compiling a pip nobody runs."""
    env_dir = wheel.parent.parent / "venv"
    venv.create(env_dir, with_pip=False)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "-q",
                    "--disable-pip-version-check", str(wheel)], check=True, env=_isolated_env())
    return env_dir


def _isolated_env() -> dict[str, str]:
    """This environment without what points Python or pip at other packages.

    With PYTHONPATH (or PYTHONHOME, PYTHONUSERBASE, a VIRTUAL_ENV, PIP_TARGET…) inherited, the
    venv's pip would take the caller's numpy & co. as already installed and skip them, and the
    commands run later (without it) would then miss them: so every subprocess here drops them.
    """
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PYTHON") and k not in ("VIRTUAL_ENV", "PIP_TARGET", "PIP_PREFIX", "PIP_USER")}


def _run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = _isolated_env()
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_wheel_holds_the_license(wheel: Path) -> None:
    """BSD-3-Clause asks every binary redistribution to carry the notice: the wheel ships LICENSE byte for
    byte (PEP 639: .dist-info/licenses/) and its metadata names the licence and the file."""
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        licenses = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert len(licenses) == 1, names
        assert whl.read(licenses[0]) == (REPO / "LICENSE").read_bytes()
        metadata = whl.read(licenses[0].split("/")[0] + "/METADATA").decode("utf-8")
    assert "License-Expression: BSD-3-Clause" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()


def test_the_wheel_metadata_has_classifiers_and_project_urls(wheel: Path) -> None:
    """What PyPI shows beside the name: the Python versions, the audience and typing (Classifier) and where
    the docs, source and issues are (Project-URL)."""
    with zipfile.ZipFile(wheel) as whl:
        meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        lines = whl.read(meta).decode("utf-8").splitlines()
    classifiers = [line.removeprefix("Classifier: ") for line in lines if line.startswith("Classifier: ")]
    urls = dict(line.removeprefix("Project-URL: ").split(", ", 1) for line in lines if line.startswith("Project-URL: "))
    assert {"Programming Language :: Python :: 3.11", "Typing :: Typed"} <= set(classifiers)
    assert {"Documentation", "Source", "Issues"} <= set(urls) and all(u.startswith("https://") for u in urls.values())


def test_installed_package_is_the_wheel_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    where = _run(installed, "python", "-c", "import nczarr_conformance as m; print(m.__file__)", cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed), where.stdout


def test_every_cli_runs_from_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    sample = tmp_path / "sample.nc"
    shutil.copy(REPO / "corpus" / "rich.nc", sample)
    for cli in ("nc2nczarr", "nczarr-dump", "nczarr-check", "nczarr-fix", "nczarr-conformance"):
        version = _run(installed, cli, "--version", cwd=tmp_path)
        assert version.returncode == 0 and version.stdout.startswith(f"{cli} "), (cli, version.stderr)
    converted = _run(installed, "nc2nczarr", "-q", str(sample), str(tmp_path / "out.zip"), cwd=tmp_path)
    assert converted.returncode == 0, converted.stderr
    checked = _run(installed, "nczarr-check", "--deep", str(tmp_path / "out.zip"), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    dumped = _run(installed, "nczarr-dump", str(tmp_path / "out.zip"), cwd=tmp_path)
    assert dumped.returncode == 0 and dumped.stdout.startswith("netcdf out {"), dumped.stderr


def test_conformance_report_runs_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    result = _run(installed, "nczarr-conformance", "report", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    interop = json.loads((out / "interop.json").read_text(encoding="utf-8"))
    # the corpus cases read netcdf-c's reference stores, which must ship inside the wheel
    corpus_cells = [c for c in interop["cells"] if c["case"].startswith("corpus-") and c["writer"] == "netcdf-c-corpus"
                    and c["reader"] == "ours"]
    assert corpus_cells and all(c["status"] == "pass" for c in corpus_cells), corpus_cells
