"""The package as a Python user meets it (issue 37, item 4): ``python -m``, ``dir``, ``help``, the typed
calls, the notebook reprs and ``write(DataTree)``. Expected names come from pyproject.toml and from the
converter's own signature; expected contents from netCDF4-python reading the source file."""
from __future__ import annotations

import inspect
import pydoc
import subprocess
import sys
import tomllib

import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance.errors import UsageError
from nczarr_conformance.model import diff
from nczarr_conformance.peers import netcdf4
from nczarr_conformance.testing.ignores import CONTIGUOUS
from tests.conftest import CORPUS, REPO, require_module

SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nczarr_conformance", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def test_python_m_lists_every_command_of_pyproject():
    shown = run_module()
    assert shown.returncode == 0 and shown.stderr == ""
    listed = [line.split()[0] for line in shown.stdout.splitlines() if line.startswith("  ")]
    assert sorted(listed) == sorted(SCRIPTS)
    assert run_module("--help").stdout == shown.stdout


@pytest.mark.parametrize("command", sorted(SCRIPTS))
def test_python_m_runs_each_command_as_its_script_does(command):
    """``python -m nczarr_conformance CMD --version`` is the script's own answer, under the script's name."""
    module, _, function = SCRIPTS[command].partition(":")
    script = subprocess.run([sys.executable, "-c", f"import sys; from {module} import {function}; "
                             f"sys.argv[:] = [{command!r}, '--version']; {function}()"],
                            capture_output=True, text=True, timeout=120)
    via_m = run_module(command, "--version")
    assert (via_m.returncode, via_m.stdout) == (script.returncode, script.stdout) == (0, script.stdout)
    assert via_m.stdout.startswith(f"{command} ")


def test_python_m_names_an_unknown_command_in_one_line():
    failed = run_module("ncdump", "x.nc")
    assert failed.returncode == 2 and failed.stdout == ""
    assert failed.stderr.count("\n") == 1 and "'ncdump'" in failed.stderr and "nczarr-dump" in failed.stderr


def test_dir_shows_the_public_names_only():
    assert dir(ncz) == sorted(ncz.__all__)
    for leaked in ("Any", "TYPE_CHECKING", "annotations", "importlib", "_LAZY"):
        assert leaked not in dir(ncz)
    for name in ncz.__all__:  # every exported name resolves, the classes the calls return included
        assert getattr(ncz, name) is not None
    assert {"LazyDataset", "LazyVariable", "Report", "Finding", "ConvertStats"} <= set(ncz.__all__)


def test_help_explains_usage():
    text = pydoc.render_doc(ncz, renderer=pydoc.plaintext)
    for usage in ("ncz.open(", "ncz.convert(", "ncz.write(", "ncz.check(", "python -m nczarr_conformance"):
        assert usage in text
    assert "PEP 562" not in text and "__getattr__" not in text.split("FUNCTIONS")[0]


def test_convert_spells_out_every_option_of_the_converter():
    """Each keyword of conversion/from_netcdf.convert is a typed keyword-only parameter of ncz.convert, same
    default; ``**options`` is gone, so a misspelt option is a TypeError instead of reaching the converter."""
    from nczarr_conformance.conversion.from_netcdf import convert as converter

    ours = inspect.signature(ncz.convert).parameters
    theirs = {n: p for n, p in inspect.signature(converter).parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert not any(p.kind is p.VAR_KEYWORD for p in ours.values())
    assert {n: (p.default, p.annotation) for n, p in theirs.items()} == {
        n: (ours[n].default, ours[n].annotation) for n in theirs}
    assert all(ours[n].kind is ours[n].KEYWORD_ONLY for n in theirs)
    written = {n for n, p in inspect.signature(ncz.write).parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert set(theirs) - {"announce"} <= written
    with pytest.raises(TypeError, match="flavour"):
        ncz.convert(CORPUS / "rich.nc", "/nonexistent/x.zip", flavour="zarr")  # type: ignore[call-arg]


def test_convert_passes_its_options_through(tmp_path):
    announced = []
    stats = ncz.convert(CORPUS / "rich.nc", tmp_path / "r.file", flavor="zarr", consolidate=False,
                        for_readers=["xarray"], announce=announced.append)
    assert stats.chunks > 0 and len(announced) == 1
    assert not (tmp_path / "r.file" / ".zmetadata").exists()


def test_write_of_a_model_refuses_converter_options(tmp_path):
    model = ncz.open_dataset(str(CORPUS / "rich.nc"))
    with pytest.raises(UsageError, match="takes no consolidate, threads"):
        ncz.write(model, tmp_path / "m.file", consolidate=True, threads=2)


@pytest.fixture(scope="module")
def rich_store(tmp_path_factory):
    out = tmp_path_factory.mktemp("surface") / "rich.zip"
    ncz.convert(CORPUS / "rich.nc", out)
    return out


def _groups(nc):
    yield nc
    for sub in nc.groups.values():
        yield from _groups(sub)


def test_dataset_repr_lists_what_netcdf4_python_sees(rich_store):
    """Every dimension, variable (type, dimensions, chunks) and attribute name of the source file, as
    netCDF4-python reads it, is in the multi-line repr; the HTML repr holds the same names, escaped."""
    nc4 = require_module("netCDF4")
    with ncz.open(rich_store) as ds:
        text, page = repr(ds), ds._repr_html_()
    assert text.splitlines()[0] == f"<LazyDataset {rich_store} (nczarr-4.10)>"
    with nc4.Dataset(CORPUS / "rich.nc") as nc:
        for group in _groups(nc):
            if group is not nc:
                assert f"group {group.name}:" in text and f"group <code>{group.name}</code>" in page
            for name, dim in group.dimensions.items():
                assert f"{name}={dim.size}" in text
            for name, var in group.variables.items():
                chunks = var.chunking()
                assert f" {name}({', '.join(var.dimensions)})" in text
                if chunks != "contiguous":
                    assert f"{name}({', '.join(var.dimensions)})  chunks {tuple(chunks)}" in text
                assert f" {name}(" in page
            for name in group.ncattrs():
                assert f"    {name} = " in text
    assert "<script" not in page and "héllo" in page


def test_check_report_repr_is_the_commands_text(rich_store):
    report = ncz.check(rich_store)
    printed = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", str(rich_store)],
                             capture_output=True, text=True, timeout=120)
    lines = repr(report).splitlines()
    assert lines[0] == f"<Report {rich_store}: exit code {printed.returncode}>"
    ours = [line for line in lines[1:] if "objects read" not in line]
    assert ours == [line for line in printed.stdout.splitlines() if "objects read" not in line] and ours
    page = report._repr_html_()
    assert page.startswith("<section>") and page.count("<tr class=") == len(report.findings)


def test_write_datatree_writes_every_group(tmp_path):
    """The store equals, in netCDF4-python's model, the file DataTree.to_netcdf writes from the same tree."""
    xr = require_module("xarray")
    tree = xr.DataTree.from_dict({
        "/": xr.Dataset({"top": ("x", np.array([1, 2, 3], dtype="i2"))}, attrs={"title": "tree"}),
        "/a": xr.Dataset({"t": (("y",), np.array([1.5, 2.5], dtype="f4"), {"units": "K"})}),
        "/a/b": xr.Dataset({"s": ((), np.float64(7.0))}),
    })
    out = tmp_path / "tree.zip"
    ncz.write(tree, out)
    nc = tmp_path / "tree.nc"
    tree.to_netcdf(nc, engine="netcdf4")
    model = ncz.open_dataset(str(out))
    assert diff(netcdf4.read(str(nc)), model, ignore=CONTIGUOUS) == []
    assert sorted(model.root.groups) == ["a"] and sorted(model.root.groups["a"].groups) == ["b"]
    with ncz.open(out) as ds:
        assert ds["a/t"].info.storage.numpy == np.dtype("<f4")
        np.testing.assert_array_equal(ds["a/t"][:], tree["a"]["t"].values)
        assert ds["a/b/s"][()] == 7.0
