"""Every valid netCDF-4 file converts, on the direct-copy path and the re-encode path alike (issue 12).

Each case builds a file with netCDF4-python (h5py for what netCDF4-python cannot make: compact
layout), runs ``nc2nczarr`` in a subprocess, and compares netCDF4-python's view of the source with
its view of the output (``file://…#mode=nczarr,file``): values, and the storage netCDF4-python
reports (chunking(), filters(), endian(), get_fill_value()) wherever NCZarr can express it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.checker import check
from tests.conftest import require_module
from tests.in_process import run_main
from tests.real_files import REAL, REAL_IDS, UNDEFINED, is_netcdf3

netCDF4 = require_module("netCDF4")

PATHS = [pytest.param([], id="direct"), pytest.param(["--no-direct-copy"], id="reencode")]
REPO = Path(__file__).resolve().parent.parent


def nczarr_url(path: Path) -> str:
    return f"file://{os.path.abspath(path)}#mode=nczarr,file"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    env.pop("NCZARR_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", *args], capture_output=True,
                          text=True, timeout=300, env=env)


def run_in_process(capfd: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """:func:`run_cli`'s exit code, stdout and stderr from ``nc2nczarr``'s ``main`` in this process
    (tests/in_process.py): for tests about what a conversion writes or says, not about the process; an
    interpreter per run costs about 0.45 s of CPU, the conversion of a small file 0.01 s.
    ``test_the_command_in_a_process_says_what_main_says`` holds the two runs equal; the tests of exit codes,
    signals and tracebacks keep their real process."""
    from nczarr_conformance.cli.convert import main

    return run_main(main, args, capfd)


def convert_ok(src: Path, dst: Path, extra: list[str], capfd: pytest.CaptureFixture[str] | None = None) -> None:
    """Converted, exit 0, nothing on stderr: in this process when given ``capfd``, else as a command."""
    args = ("--quiet", *extra, str(src), str(dst))
    done = run_in_process(capfd, *args) if capfd is not None else run_cli(*args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def _values(var: Any) -> np.ndarray:
    var.set_auto_maskandscale(False)
    var.set_auto_chartostring(False)
    if len(var.shape) >= 2 and var.shape[0]:
        # row by row: netcdf-c 4.10.1 reading a whole variable whose HDF5 extent is shorter than its
        # unlimited dimension fills only the first missing value (compliance-checker's bad_missing_data.nc)
        return np.stack([np.asarray(np.ma.getdata(var[i])) for i in range(var.shape[0])])
    return np.asarray(np.ma.getdata(var[...]))


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "O":
        return bool(a.tolist() == b.tolist())
    return a.tobytes() == b.tobytes()  # NaN payloads and -0.0 count


def _netcdf_c_mangles(value: Any) -> bool:
    """Char text spelling a JSON number or boolean ("10", "1.3", "true"): netcdf-c 4.10.1 writes it as
    that JSON value (nczarr.md Appendix D) and reads it back as one character ("1"), from its own
    files too; left out of comparisons until netcdf-c reads it right."""
    if not isinstance(value, str):
        return False
    try:
        parsed = json.loads(value)
    except ValueError:
        return False
    return isinstance(parsed, (bool, int, float)) and len(value) > 1


def _attrs(obj: Any) -> dict[str, str]:
    # every name netcdf-c shows: our stores leak no _nczarr_maxstrlen any more (issue 34)
    return {n: repr(obj.getncattr(n)) for n in obj.ncattrs()}


def _comparable(attrs: dict[str, str], source: dict[str, str]) -> dict[str, str]:
    import ast

    return {n: v for n, v in attrs.items()
            if not (n in source and source[n].startswith(("'", '"'))
                    and _netcdf_c_mangles(ast.literal_eval(source[n])))}


def view(ds: Any, undefined: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """netCDF4-python's description of every group and variable (values left out for ``undefined`` keys)."""
    out: dict[str, dict[str, Any]] = {}
    skip = set(undefined)

    def group(g: Any, path: str) -> None:
        out[path] = {"dims": {n: (len(d), d.isunlimited()) for n, d in g.dimensions.items()}, "attrs": _attrs(g)}
        for name, var in g.variables.items():
            key = f"{path.rstrip('/')}/{name}"
            one_byte = var.dtype is str or np.dtype(var.dtype).itemsize == 1
            out[key] = {"dtype": str(var.dtype), "dims": var.dimensions, "shape": var.shape,
                        "chunking": var.chunking(), "filters": var.filters(),
                        # netcdf-c reports 1-byte NCZarr types as "native": their byte order means nothing
                        "endian": None if one_byte else var.endian(),
                        "fill": repr(var.get_fill_value()), "attrs": _attrs(var)}
            if key not in skip:
                out[key]["values"] = _values(var)
        for name, sub in g.groups.items():
            group(sub, f"{path.rstrip('/')}/{name}")

    group(ds, "/")
    return out


def differences(src: Path, dst: Path, undefined: Iterable[str] = (), *, storage: bool = True) -> list[str]:
    """Where netCDF4-python's view of the NCZarr output differs from its view of the source.

    ``storage=False`` leaves out chunking, filters and byte order, for a netCDF-3 source that has none.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with netCDF4.Dataset(str(src)) as a, netCDF4.Dataset(nczarr_url(dst)) as b:
            va, vb = view(a, undefined), view(b, undefined)
    found: list[str] = []
    for key in sorted(set(va) | set(vb)):
        if key not in va or key not in vb:
            found.append(f"{key}: only in {'source' if key in va else 'output'}")
            continue
        for field in sorted(set(va[key]) | set(vb[key])):
            x, y = va[key].get(field), vb[key].get(field)
            if not storage and field in ("chunking", "filters", "endian"):
                continue
            if field == "values":
                if not _same_values(x, y):
                    found.append(f"{key}: values {x!r} != {y!r}")
            elif field == "attrs":
                if _comparable(x, x) != _comparable(y, x):
                    found.append(f"{key}: attrs {x!r} != {y!r}")
            elif field == "chunking" and x == "contiguous":
                if not isinstance(y, list):  # NCZarr stores everything chunked: it cannot say contiguous
                    found.append(f"{key}: chunking {y!r}")
            elif x != y:
                found.append(f"{key}: {field} {x!r} != {y!r}")
    return found


def build(path: Path, body: Callable[[Any], None], url: str | None = None) -> Path:
    with netCDF4.Dataset(url or str(path), "w", format="NETCDF4") as nc:
        body(nc)
    return path


def zarray(store: Path, var: str) -> dict[str, Any]:
    return json.loads((store / var / ".zarray").read_text())


def chunk_keys(store: Path, var: str) -> list[str]:
    return sorted(p.name for p in (store / var).iterdir() if not p.name.startswith("."))


# ---- variables with no chunk stored --------------------------------------------------------------

def _never_written(nc: Any) -> None:
    nc.createDimension("time", None)
    nc.createDimension("x", 6)
    crs = nc.createVariable("crs", "i4")  # declared, never written
    crs.grid_mapping_name = "latitude_longitude"
    t = nc.createVariable("time", "f8", ("time",))
    t[:] = np.arange(3.0)
    nc.createVariable("rec_unwritten", "f4", ("time", "x"), zlib=True, shuffle=True)  # records, none written
    nc.createVariable("fixed_unwritten", "i2", ("x",), chunksizes=(2,), zlib=True, fill_value=-7)
    nc.createVariable("plain_unwritten", "f8", ("x",), chunksizes=(3,))
    nc.createVariable("contig_unwritten", "i8", ("x",), contiguous=True)
    g = nc.createGroup("g")
    g.createVariable("be_unwritten", ">i4", ("x",), chunksizes=(4,), endian="big")


@pytest.mark.parametrize("path", PATHS)
def test_variables_with_no_chunk_stored_convert(tmp_path: Path, path: list[str]) -> None:
    """The default (direct) path used to exit 2 with 'unexpected MemoryError' on these."""
    src = build(tmp_path / "never.nc", _never_written)
    out = tmp_path / "never.file"
    convert_ok(src, out, path)
    assert differences(src, out) == []
    assert chunk_keys(out, "rec_unwritten") == []  # nothing was written, nothing is stored
    assert chunk_keys(out, "fixed_unwritten") == []


@pytest.mark.parametrize("path", PATHS)
def test_partly_written_chunked_variables(tmp_path: Path, path: list[str], capfd: pytest.CaptureFixture[str]) -> None:
    def body(nc: Any) -> None:
        nc.createDimension("time", None)
        nc.createDimension("x", 10)
        v = nc.createVariable("v", "f4", ("time", "x"), chunksizes=(2, 4), zlib=True, shuffle=True, fill_value=-1.5)
        v[0:3, 0:5] = np.arange(15, dtype="f4").reshape(3, 5)
        v[5, 9] = 42.0  # the record dimension grows to 6: most chunks stay unwritten
        w = nc.createVariable("w", "i8", ("x",), chunksizes=(3,))
        w[3:6] = [1, 2, 3]
        be = nc.createVariable("be", "f8", ("time", "x"), chunksizes=(3, 5), endian="big", zlib=True)
        be[0, :] = np.linspace(0, 1, 10)

    src = build(tmp_path / "part.nc", body)
    out = tmp_path / "part.file"
    convert_ok(src, out, path, capfd)
    assert differences(src, out) == []


# ---- layouts and shapes --------------------------------------------------------------------------

def _layouts(path: Path) -> Path:
    import h5py

    def body(nc: Any) -> None:
        nc.createDimension("x", 3)
        nc.createDimension("empty", 0)
        nc.createDimension("rec", None)
        c = nc.createVariable("contig", "i4", ("x",), contiguous=True)
        c[:] = [7, 8, 9]
        s = nc.createVariable("scalar", "f8")
        s.assignValue(-0.0)
        t = nc.createVariable("scalar_text", str)
        t[0] = "lonely"
        nc.createVariable("fixed0", "f4", ("empty",))
        nc.createVariable("fixed0_2d", "i2", ("empty", "x"), chunksizes=(1, 3))
        nc.createVariable("unlim0", "f8", ("rec", "x"))
        nc.createVariable("unlim0_1d", "u2", ("rec",))

    build(path, body)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with h5py.File(path, "a") as f:  # netCDF4-python cannot ask for compact storage; h5py can
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(h5py.h5d.COMPACT)
            h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_I16LE, h5py.h5s.create_simple((3,)), dcpl=dcpl)
            f["compact"][...] = [-1, 0, 1]
            f["compact"].dims[0].attach_scale(f["x"])
            assert f["compact"].id.get_create_plist().get_layout() == h5py.h5d.COMPACT
    return path


@pytest.mark.parametrize("path", PATHS)
def test_contiguous_compact_scalar_and_zero_length(tmp_path: Path, path: list[str],
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    src = _layouts(tmp_path / "layouts.nc")
    out = tmp_path / "layouts.file"
    convert_ok(src, out, path, capfd)
    assert differences(src, out) == []
    with netCDF4.Dataset(str(src)) as nc:
        assert nc["compact"][:].tolist() == [-1, 0, 1]  # netCDF4-python reads the compact dataset


# ---- fletcher32 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS)
def test_fletcher32_is_kept_as_a_codec(tmp_path: Path, path: list[str], capfd: pytest.CaptureFixture[str]) -> None:
    def body(nc: Any) -> None:
        nc.createDimension("x", 10)
        a = nc.createVariable("a", "f4", ("x",), zlib=True, shuffle=True, fletcher32=True, chunksizes=(4,))
        a[:] = np.arange(10, dtype="f4")
        b = nc.createVariable("b", "i4", ("x",), fletcher32=True, chunksizes=(4,))
        b[:7] = np.arange(7)

    src = build(tmp_path / "f32.nc", body)
    out = tmp_path / "f32.file"
    convert_ok(src, out, path, capfd)
    assert differences(src, out) == []  # filters() says fletcher32 on both sides
    # the .zarray netcdf-c 4.10 itself writes for these variables (netCDF4-python into NCZarr)
    ref = tmp_path / "ref.file"
    build(ref, body, nczarr_url(ref))
    for name in ("a", "b"):
        ours, theirs = zarray(out, name), zarray(ref, name)
        assert (ours["compressor"], ours["filters"] and [f["id"] for f in ours["filters"]]) == \
               (theirs["compressor"], theirs["filters"] and [f["id"] for f in theirs["filters"]])


# ---- NOFILL -------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS)
def test_nofill_written_as_fill_value_null(tmp_path: Path, path: list[str], capfd: pytest.CaptureFixture[str]) -> None:
    def body(nc: Any) -> None:
        nc.createDimension("x", 12)
        nc.createDimension("n", 2)
        full = nc.createVariable("full", "i4", ("x",), fill_value=False, chunksizes=(4,))
        full[:] = np.arange(12)
        full[4:8] = netCDF4.default_fillvals["i4"]  # a chunk that looks like fill, but NOFILL has none
        part = nc.createVariable("part", "f8", ("x",), fill_value=False, chunksizes=(4,), zlib=True)
        part[0:4] = [0.0, -1.0, 2.5, 0.0]  # chunk 0 only: chunks 1 and 2 hold undefined values
        contig = nc.createVariable("contig", "u2", ("x",), fill_value=False, contiguous=True)
        contig[:] = np.arange(12, dtype="u2")
        never = nc.createVariable("never", "i8", ("x",), fill_value=False, contiguous=True)
        never.note = "never written"
        text = nc.createVariable("text", "S1", ("x", "n"), fill_value=False)
        text[:] = np.full((12, 2), b"a", dtype="S1")

    src = build(tmp_path / "nofill.nc", body)
    out = tmp_path / "nofill.file"
    convert_ok(src, out, path, capfd)
    # unwritten NOFILL values are undefined (HDF5 hands back whatever memory held): compared apart
    assert differences(src, out, undefined=["/part", "/never"]) == []  # fill: None on both sides
    for name in ("full", "part", "contig", "never", "text"):
        assert zarray(out, name)["fill_value"] is None
    with netCDF4.Dataset(str(src)) as a, netCDF4.Dataset(nczarr_url(out)) as b:
        assert _values(a["part"])[:4].tobytes() == _values(b["part"])[:4].tobytes()
    assert chunk_keys(out, "part") == ["0"]  # only what the source stored
    assert chunk_keys(out, "never") == []
    assert chunk_keys(out, "full") == ["0", "1", "2"]  # a NOFILL chunk is kept even when it looks like fill


# ---- real files from public packages (corpus/real/README.md) ----------------------------------------

@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("src", REAL, ids=REAL_IDS)
def test_real_files_convert(src: Path, tmp_path: Path, path: list[str], capfd: pytest.CaptureFixture[str]) -> None:
    """Zero differences through netCDF4-python, and nczarr-check --deep passes on the output.

    The conversion and the check run in this process (``run_in_process``; the check's verdict is
    ``Report.exit_code``, tests/check holds the command to it): an interpreter for each was most of this
    test's time."""
    out = tmp_path / "real.file"
    convert_ok(src, out, path, capfd)
    assert differences(src, out, UNDEFINED.get(src.name, ()), storage=not is_netcdf3(src)) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = check(str(out), deep=True)
    assert report.exit_code == 0, report.to_text()[-2000:]


def _written(store: Path) -> dict[str, bytes] | None:
    """Every object of a directory store, by key (None: nothing written)."""
    if not store.exists():
        return None
    return {p.relative_to(store).as_posix(): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


#: one run of each outcome: converted quietly; refused (exit 2, one line, nothing written); converted
#: leaving out what --skip-unsupported names (exit 0, warning lines); a usage error (argparse's exit 2)
IN_PROCESS_CASES = {
    "converted": ("netcdf4-python/test_gold.nc", ("--quiet",)),
    "refused": ("hdf5/written-here/anndata.h5ad", ("--quiet",)),
    "skip-unsupported": ("hdf5/written-here/anndata.h5ad", ("--quiet", "--skip-unsupported")),
    "usage error": ("netcdf4-python/test_gold.nc", ("--shard", "2")),
}


@pytest.mark.parametrize("case", sorted(IN_PROCESS_CASES))
def test_the_command_in_a_process_says_what_main_says(case: str, tmp_path: Path,
                                                      capfd: pytest.CaptureFixture[str]) -> None:
    """``run_in_process`` stands for the command where the tests use it: nc2nczarr started as a process gives the
    same exit code, stdout and stderr, and writes the same objects, as its ``main`` run in this process."""
    source, args = IN_PROCESS_CASES[case]
    src, out = REPO / "corpus" / "real" / source, tmp_path / "out.file"
    started = run_cli(*args, str(src), str(out))
    written = _written(out)
    if out.exists():
        shutil.rmtree(out)
    in_process = run_in_process(capfd, *args, str(src), str(out))
    assert (in_process.returncode, in_process.stdout, in_process.stderr) == \
           (started.returncode, started.stdout, started.stderr)
    assert _written(out) == written
    assert (started.returncode == 0) == (written is not None) and bool(started.stderr) == (case != "converted")


def test_real_files_are_found() -> None:
    """The corpus and the installed packages' test data are really there (a glob that finds nothing tests nothing)."""
    names = {p.name for p in REAL}
    assert {"test_gold.nc", "bad_missing_data.nc", "ref_tst_interops4.nc", "ref_nctest_classic.nc"} <= names
    assert len(REAL) >= 21


def test_a_command_run_in_process_leaves_this_process_as_it_found_it(tmp_path: Path, capfd) -> None:
    """tests/in_process.run_main puts back what a command changes in the process that runs it: its signal
    handlers, the unraisable hook, the recorded signal, whether signals are deferred (a command ends deferring
    them), the program name a lock records; a later test in the same worker runs as in a fresh one."""
    import signal

    from nczarr_conformance import safety
    from nczarr_conformance.cli.convert import main

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook,
              safety._received, safety._defer, safety.program)
    src = Path(__file__).resolve().parents[1] / "corpus" / "rich.nc"
    assert run_main(main, ["-q", str(src), str(tmp_path / "out.file")], capfd).returncode == 0
    after = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook,
             safety._received, safety._defer, safety.program)
    assert after == before
