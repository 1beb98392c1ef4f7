"""cdl/quick_header.py: ``nczarr-dump -h`` of a plain store without numpy prints what the full command
prints, or stands aside.

The property held everywhere here: for a store, the quick header is None or exactly the full
command's output, and None wherever the full command fails. The expected text is the full
command's (nczarr/reader.py through cdl/writer.py), which tests/test_cdl_baselines.py holds to
ncdump 4.9.0 and to netcdf-c's baselines; the stores come from ncgen 4.9.0, netCDF4-python on
netcdf-c 4.10.1, our writer's three netcdf-c layouts, and hostile edits of each.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nczarr_conformance.access.dataset import dataset_name
from nczarr_conformance.cdl import header_text
from nczarr_conformance.cdl import quick_header as quick
from nczarr_conformance.cli import dump
from nczarr_conformance.errors import UnsupportedError
from nczarr_conformance.model import STORAGE_INTERNAL, STORAGE_INTERNAL_PREFIXES
from nczarr_conformance.nctypes import BY_CODE
from nczarr_conformance.nczarr import dtypes, flavors
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores.directory import DirectoryStore
from nczarr_conformance.testing.samples import small_model
from nczarr_conformance.testing.strategies import datasets
from tests.conftest import NETCDF_C_CORPUS, require_module, require_tool
from tests.in_process import run_main

LAYOUTS = ("nczarr-2", "nczarr-2-upper", "nczarr-4.10")


def _full(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """The command's exit code and output with the quick path switched off."""
    with monkeypatch.context() as patch:
        patch.setattr(quick, "quick_header", lambda path: None)
        done = run_main(dump.main, ["-h", str(path)])
    return done.returncode, done.stdout


def _holds(path: Path, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The quick header of ``path``, after checking it is None or the full command's output (and None where
    the full command fails)."""
    answer = quick.quick_header(str(path))
    code, full = _full(path, monkeypatch)
    if code != 0:
        assert answer is None, f"the full command exits {code}, the quick path printed a header"
    elif answer is not None:
        assert answer == full
    return answer


# ---- netcdf-c's own stores -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ncgen_stores(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Every netcdf-c CDL baseline ncgen 4.9.0 builds into an NCZarr directory (nczarr-2-upper)."""
    ncgen = require_tool("ncgen")
    where = tmp_path_factory.mktemp("ncgen")
    built = []
    for cdl in sorted(NETCDF_C_CORPUS.glob("ref_*.cdl")):
        store = where / f"{cdl.stem}.file"
        done = subprocess.run([ncgen, "-4", "-o", f"file://{store}#mode=nczarr,file", str(cdl)],
                              capture_output=True, timeout=60)
        if done.returncode == 0 and (store / ".zgroup").exists():
            built.append(store)
    assert len(built) >= 20, "ncgen 4.9.0 built too few of netcdf-c's baselines to judge anything"
    return built


def test_ncgen_490_stores_print_as_the_full_command_prints_them(ncgen_stores, monkeypatch):
    """Each store ncgen 4.9.0 builds from netcdf-c's baselines: the same header, or the full command's."""
    answered = [store.name for store in ncgen_stores if _holds(store, monkeypatch) is not None]
    # stores of numeric variables and typed attributes, in groups, with unlimited dimensions and scalars: what
    # the quick path is for
    for name in ("ref_ndims.file", "ref_misc2.file", "ref_groups_regular.file", "ref_scalar.file", "ref_whole.file",
                 "ref_byte_fill_value_null.file"):
        assert name in answered, f"{name}: numeric variables, typed attributes, yet the quick path stood aside"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(dataset=datasets(max_depth=2))
def test_netcdf4_4101_stores_print_as_the_full_command_prints_them(dataset, tmp_path, monkeypatch):
    """Models netCDF4-python (netcdf-c 4.10.1) writes as NCZarr: the same header as the full command's, the quick
    path answering for every one (variables of every atomic type, char and string included)."""
    from nczarr_conformance.peers import netcdf4

    require_module("netCDF4")
    store = tmp_path / f"s{time.monotonic_ns()}.file"
    netcdf4.write(dataset, f"file://{store}#mode=nczarr,file")
    assert _holds(store, monkeypatch) is not None, "a store netcdf-c 4.10.1 wrote: the quick path stood aside"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dataset=datasets(max_depth=2), layout=st.sampled_from(LAYOUTS), consolidated=st.booleans())
def test_our_stores_in_each_netcdf_c_layout_print_as_the_full_command_prints_them(dataset, layout, consolidated,
                                                                                   tmp_path, monkeypatch):
    store = tmp_path / f"s{time.monotonic_ns()}.file"
    try:
        with DirectoryStore(store, "w") as target:
            write_dataset(dataset, target, flavor=layout)
    except UnsupportedError:  # an unlimited dimension in a layout before netcdf-c 4.9.3's
        assume(False)
    if not consolidated and (store / ".zmetadata").exists():
        (store / ".zmetadata").unlink()
    assert _holds(store, monkeypatch) is not None, f"our {layout} store: the quick path stood aside"


# ---- hostile and unusual stores ----------------------------------------------------------------------------------
@pytest.fixture
def plain(tmp_path: Path) -> Path:
    """A store of int, char, string, double and ubyte variables the quick path answers for (checked), without
    consolidated metadata (edits show)."""
    model = small_model()
    store = tmp_path / "plain.file"
    with DirectoryStore(store, "w") as target:
        write_dataset(model, target, flavor="nczarr-4.10")
    (store / ".zmetadata").unlink(missing_ok=True)
    assert quick.quick_header(str(store)) is not None
    return store


def _first_array(store: Path) -> Path:
    return store / "v"  # int v(t, x), with a _FillValue


def _edit(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _control_named(store: Path) -> None:
    """The array v renamed v\x01 on disk and in its group's list: an unsafe key, which the full reader refuses."""
    (store / "v").rename(store / "v\x01")
    _edit(store / ".zattrs", lambda d: d["_nczarr_group"].update(
        arrays=["v\x01" if n == "v" else n for n in d["_nczarr_group"]["arrays"]]))


def _attrs_types(doc: dict) -> dict:  # type: ignore[type-arg]
    return doc.setdefault("_nczarr_attr", {}).setdefault("types", {})


HOSTILE = {
    "an untyped attribute (its type is inferred)": lambda s: _edit(s / ".zattrs", lambda d: d.update(extra=1)),
    "an attribute with an empty name": lambda s: _edit(s / ".zattrs", lambda d: (d.update({"": "x"}),
                                                                                 _attrs_types(d).update({"": ">S1"}))),
    "a float attribute spelled as a word": lambda s: _edit(s / ".zattrs", lambda d: (
        d.update(word="lots"), _attrs_types(d).update(word="<f8"))),
    "an integer attribute out of its range": lambda s: _edit(s / ".zattrs", lambda d: (
        d.update(big=300), _attrs_types(d).update(big="|i1"))),
    "a float attribute past float32": lambda s: _edit(s / ".zattrs", lambda d: (
        d.update(huge=1e39), _attrs_types(d).update(huge="<f4"))),
    "a boolean shape": lambda s: _edit(_first_array(s) / ".zarray", lambda d: d.update(shape=[True] * len(d["shape"]))),
    "a boolean dtype": lambda s: _edit(_first_array(s) / ".zarray", lambda d: d.update(dtype="|b1")),
    "zarr_format 3 in a .zarray": lambda s: _edit(_first_array(s) / ".zarray", lambda d: d.update(zarr_format=3)),
    "a codec without an id": lambda s: _edit(_first_array(s) / ".zarray", lambda d: d.update(compressor={"level": 1})),
    "an order of 'K'": lambda s: _edit(_first_array(s) / ".zarray", lambda d: d.update(order="K")),
    "a _FillValue of another type than its variable's": lambda s: _edit(_first_array(s) / ".zattrs", lambda d: (
        d.update(_FillValue=1.5), _attrs_types(d).update(_FillValue="<f8"))),
    "a fill_value of the wrong kind": lambda s: _edit(_first_array(s) / ".zarray", lambda d: d.update(fill_value="x")),
    "a shape longer than its dimension": lambda s: _edit(_first_array(s) / ".zarray", lambda d: d.update(
        shape=[n + 5 for n in d["shape"]], chunks=[n + 5 for n in d["shape"]])),
    "a .zarray missing": lambda s: (_first_array(s) / ".zarray").unlink(),
    "a char variable's fill_value a number": lambda s: _edit(s / "c" / ".zarray", lambda d: d.update(fill_value=0)),
    "a string variable's dtype an object without a codec": lambda s: _edit(s / "s" / ".zarray", lambda d: d.update(
        dtype="|O")),
    "a string dtype of length 0": lambda s: _edit(s / "s" / ".zarray", lambda d: d.update(dtype="|S0")),
    "a unicode dtype of length 0": lambda s: _edit(s / "s" / ".zarray", lambda d: d.update(dtype="<U0")),
    "a .zarray that is a FIFO": lambda s: _fifo(_first_array(s) / ".zarray"),
    "a .zattrs symlinked outside the store": lambda s: ((s / ".zattrs").rename(s.parent / "outside.json"),
                                                        (s / ".zattrs").symlink_to(s.parent / "outside.json")),
    "a .zgroup that is not JSON": lambda s: (s / ".zgroup").write_bytes(b"{\"zarr_format\": 2,"),
    "a .zgroup in netcdf-c's lenient numbers": lambda s: (s / ".zgroup").write_text(
        (s / ".zgroup").read_text().replace('"zarr_format": 2', '"zarr_format": 2, "x": 0.')),
    "a .zgroup that is not UTF-8": lambda s: (s / ".zgroup").write_bytes(b'{"zarr_format": 2, "x": "\xff"}'),
    "JSON nested 300 deep": lambda s: _edit(s / ".zgroup", lambda d: d.update(deep=json.loads("[" * 300 + "]" * 300))),
    "a .zmetadata that is not JSON": lambda s: (s / ".zmetadata").write_text("<html>"),
    "a .zmetadata without metadata": lambda s: (s / ".zmetadata").write_text("{}"),
    "no superblock (pure Zarr)": lambda s: _edit(s / ".zattrs", lambda d: d.pop("_nczarr_superblock")),
    "a group listing a missing array": lambda s: _edit(s / ".zattrs", lambda d: d["_nczarr_group"]["arrays"].append(
        "ghost")),
    "a group listing '..'": lambda s: _edit(s / ".zattrs", lambda d: d["_nczarr_group"]["arrays"].append("..")),
    "dimension references fewer than the shape's": lambda s: _edit(_first_array(s) / ".zattrs", lambda d: d[
        "_nczarr_array"]["dimension_references"].pop()),
    "a scalar of shape [2, 3]": lambda s: _edit(s / "v" / ".zattrs", lambda d: d["_nczarr_array"].update(
        storage="scalar")),
    "an array named with a control character": _control_named,
    "a dimension of negative size": lambda s: _edit(s / ".zattrs", lambda d: d["_nczarr_group"]["dimensions"].update(
        bad=-1)),
    "a superblock that is not an object": lambda s: _edit(s / ".zattrs", lambda d: d.update(_nczarr_superblock=2)),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_or_unusual_store_prints_as_the_full_command_prints_it_or_is_left_to_it(plain, case,
                                                                                           monkeypatch):
    HOSTILE[case](plain)
    _holds(plain, monkeypatch)
    assert quick.quick_header(str(plain)) is None, f"{case}: the quick path vouched for it"


READ_ALIKE = {
    "a char variable with netcdf-c's empty _FillValue (a NUL)": lambda s: _edit(s / "c" / ".zattrs", lambda d: (
        d.update(_FillValue=""), _attrs_types(d).update(_FillValue=">S1"))),
    "a |S1 variable: a string of length 1 (Appendix E), unless marked char": lambda s: _edit(
        s / "c" / ".zarray", lambda d: d.update(dtype="|S1")),
    "a |S1 variable marked char (our writer's)": lambda s: (
        _edit(s / "c" / ".zarray", lambda d: d.update(dtype="|S1")),
        _edit(s / "c" / ".zattrs", lambda d: d["_nczarr_array"].update(nczarr_type="char"))),
    "netcdf-c 4.9.0's <U1 char and a <U8 string": lambda s: (
        _edit(s / "c" / ".zarray", lambda d: d.update(dtype="<U1")), _edit(s / "s" / ".zarray", lambda d: d.update(
            dtype="<U8"))),
    "a float attribute finer than float32 (16777217 as <f4 reads as 16777216)": lambda s: _edit(
        s / ".zattrs", lambda d: (d.update(fine=[16777217, 0.1, 1e-45]), _attrs_types(d).update(fine="<f4"))),
    "a char attribute stored as JSON (Appendix D case 3)": lambda s: _edit(s / ".zattrs", lambda d: (
        d.update(obj={"a": [1, 2.5]}, num=42), _attrs_types(d).update(obj=">S1", num=">S1"))),
    "a string attribute holding a number": lambda s: _edit(s / ".zattrs", lambda d: (
        d.update(strs=["a", 7]), _attrs_types(d).update(strs="|S64"))),
    "an integer attribute given as true and 2.0": lambda s: _edit(s / ".zattrs", lambda d: (
        d.update(ints=[True, 2.0]), _attrs_types(d).update(ints="<i4"))),
    "a float attribute spelled NaN and -Infinity": lambda s: _edit(s / ".zattrs", lambda d: (
        d.update(odd=["NaN", "-Infinity", "2.5"]), _attrs_types(d).update(odd="<f8"))),
    "a .zattrs changed after .zmetadata was written (the full reader reads .zmetadata)": lambda s: (
        (s / ".zmetadata").write_text(json.dumps({"metadata": {
            k: json.loads((s / k).read_text()) for k in (str(p.relative_to(s)) for p in s.rglob(".z*"))},
            "zarr_consolidated_format": 1})),
        _edit(s / ".zattrs", lambda d: d.update(title="changed afterwards"))),
}


@pytest.mark.parametrize("case", sorted(READ_ALIKE))
def test_an_unusual_store_both_read_prints_the_same(plain, case, monkeypatch):
    READ_ALIKE[case](plain)
    assert _holds(plain, monkeypatch) is not None, f"{case}: the quick path stood aside"


def test_a_root_zarr_json_beside_the_v2_root_is_read_as_v2_by_both(plain, monkeypatch):
    """The full reader tries Zarr v2 first (zarr3/reader.open_reader): a stray zarr.json changes nothing."""
    (plain / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    assert _holds(plain, monkeypatch) is not None


def test_a_limit_set_in_the_environment_is_left_to_the_full_reader(plain, monkeypatch):
    monkeypatch.setenv("NCZARR_MAX_METADATA", "10")
    assert quick.quick_header(str(plain)) is None
    code, _ = _full(plain, monkeypatch)
    assert code != 0  # the full reader applies the limit (the quick path would have printed the header)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_edit_of_one_metadata_value_keeps_the_property(plain, data, tmp_path, monkeypatch):
    """One value anywhere in the metadata replaced by any JSON: the same header, or the full command's."""
    store = tmp_path / f"e{time.monotonic_ns()}.file"
    subprocess.run(["cp", "-r", str(plain), str(store)], check=True)
    objects = sorted(p for p in store.rglob(".z*") if p.is_file())
    target = data.draw(st.sampled_from(objects))
    doc = json.loads(target.read_text())
    slots: list[tuple[object, object]] = []

    def collect(node: object) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            slots.append((node, k))
            collect(v)

    collect(doc)
    node, key = data.draw(st.sampled_from(slots))
    node[key] = data.draw(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                                       | st.text(max_size=3), lambda c: st.lists(c, max_size=3)
                                       | st.dictionaries(st.text(max_size=3), c, max_size=2), max_leaves=4))
    target.write_text(json.dumps(doc))
    _holds(store, monkeypatch)


# ---- the command line and its tables ------------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "path"), [
    (["-h", "x.file"], "x.file"), (["x.file", "-h"], "x.file"), (["--header", "a/b"], "a/b"), (["-H", "/a"], "/a"),
    (["x.file"], None), (["-h", "-s", "x.file"], None), (["-h", "x.zip"], None), (["-h", "s3://b/x"], None),
    (["-h", "x.file#mode=zarr"], None), (["-h", "~/x.file"], None), (["-h", "a/../x.file"], None),
    (["-h", "x.file", "y.file"], None), (["-h", "-h"], None), (["-h", "-x"], None), (["-k", "x.file"], None)])
def test_only_a_header_flag_and_a_plain_local_path_take_the_quick_path(argv, path):
    assert quick.header_request(argv) == path


@pytest.mark.parametrize("path", ["x.file", "x.file/", "/tmp/a/x.zarr", "a//b.nc", "y", "/tmp/dir.nc4/", ".file",
                                  "weird name.file"])
def test_the_dataset_name_is_the_full_commands(path):
    assert quick.header_request(["-h", path]) == path
    assert quick.dataset_name(path) == dataset_name(path)


def test_the_tables_are_the_full_readers():
    assert quick.INTERNAL == STORAGE_INTERNAL
    assert quick.INTERNAL_PREFIXES == STORAGE_INTERNAL_PREFIXES
    assert {p: list(objs) for p, objs in quick.PIECES.items()} == {
        p: [o for o in objs if not o[0].startswith(".ncz")] for p, objs in flavors._SEARCH.items()}
    assert quick.NUMERIC == BY_CODE
    for nctype, (lo, hi) in quick.INT_RANGE.items():
        info = np.iinfo(np.dtype(next(code for code, t in BY_CODE.items() if t == nctype)))
        assert (lo, hi) == (info.min, info.max)


def test_the_command_prints_the_quick_header_without_numpy(plain):
    """In a process: the full command's bytes (run with the default limit set, which sends it down the full
    path), exit 0, and numpy never imported."""
    code = ("import runpy, sys; sys.argv = ['nczarr-dump', '-h', sys.argv[1]]\n"
            "try:\n    runpy.run_module('nczarr_conformance.cli.dump', run_name='__main__')\n"
            "finally:\n    sys.stderr.write('numpy' if 'numpy' in sys.modules else 'none')\n")
    done = subprocess.run([sys.executable, "-c", code, str(plain)], capture_output=True, timeout=60)
    full = subprocess.run([sys.executable, "-c", code, str(plain)], capture_output=True, timeout=60,
                          env={**os.environ, "NCZARR_MAX_METADATA": str(64 * 1024**2)})
    assert (done.returncode, done.stderr, full.returncode, full.stderr) == (0, b"none", 0, b"numpy")
    assert done.stdout == full.stdout and done.stdout.startswith(b"netcdf plain {")


@pytest.mark.parametrize(("signum", "said"), [(signal.SIGINT, b"interrupted"),
                                              (signal.SIGTERM, b"terminated by SIGTERM")])
def test_a_signal_during_the_quick_path_is_one_line_and_its_exit_code(plain, signum, said):
    """SIGINT or SIGTERM while the header is read: the full command's line and code (130, 143), no traceback."""
    code = ("import sys, time\nfrom nczarr_conformance.cdl import quick_header as q\nfrom nczarr_conformance.cli "
            "import dump\nreal = q.quick_header\nq.quick_header = lambda p: (print('reading', flush=True), "
            "time.sleep(30), real(p))[2]\nsys.exit(dump.main(['-h', sys.argv[1]]))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(plain)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"reading\n"
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, err, out) == (128 + signum, b"nczarr-dump: " + said + b"\n", b"")


# ---- the standard library it does without ------------------------------------------------------------------------
_JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
                            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                            max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(value=_JSON_VALUES, space=st.sampled_from(["", " ", "\n\t", "\r\n  "]), data=st.data())
def test_its_json_parse_is_json_loads(value, space, data):
    """quick_header.loads (CPython's C scanner, without importing json and re) returns what
    ``json.loads(text, strict=False)`` returns, and refuses what it refuses: on JSON, on JSON cut or with bytes
    inserted, and on NaN, a byte-order mark, control characters and extra data."""
    text = space + json.dumps(value, indent=data.draw(st.sampled_from([None, 1]))) + space
    cut = data.draw(st.integers(0, len(text)))
    inserted = data.draw(st.sampled_from(["", "x", "\ufeff", "NaN", "-Infinity", "\x01", "}", ",", " 1", "\\"]))
    for candidate in (text, text[:cut] + inserted + text[cut:]):
        try:
            expected = json.loads(candidate, strict=False)
        except ValueError:
            with pytest.raises(Exception):  # noqa: B017 (a Decline or json's own error: the full reader takes it)
                quick.loads(candidate)
        else:
            assert repr(quick.loads(candidate)) == repr(expected)


def test_its_json_parse_refuses_deep_nesting_as_json_does():
    with pytest.raises(RecursionError):
        json.loads("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RecursionError):
        quick.loads("[" * 100_000 + "]" * 100_000)


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet="-0123456789.eE+fLx\n", max_size=12))
def test_its_trailing_zero_trim_is_ncdumps(text):
    """header_text.tztrim scans by hand what ncdump.c's tztrim (and this regular expression) takes as the
    mantissa."""
    import re

    m = re.match(r"^(-?[0-9.]*)(.*)$", text, re.DOTALL)
    assert m is not None
    mantissa, rest = m.groups()
    expected = text if mantissa.endswith(".") or "." not in mantissa else mantissa.rstrip("0") + rest
    assert header_text.tztrim(text) == expected


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet="<>|=fiuSUb0123456789\u0664\n", max_size=5))
def test_a_dtype_it_reads_is_read_alike_by_the_full_reader(text):
    """What quick_header's dtype split accepts, dtypes' regular expression splits the same way."""
    try:
        order, kind, size = quick._dtype_parts(text)
    except quick.Decline:
        return
    m = dtypes._DTYPE_RE.match(text)
    assert m is not None and (m.group(1), m.group(2), int(m.group(3))) == (order, kind, size)


def test_the_quick_path_imports_no_re_json_typing_argparse_enum_or_numpy(plain):
    """Under ``python -S`` (no site-packages hooks loading anything first): the header of a plain store is printed
    with none of these loaded; each costs the start-up milliseconds (benchmarks/dump.py's start-up rows)."""
    root = Path(quick.__file__).parents[2]
    code = ("import sys\nfrom nczarr_conformance.cli import dump\ncode = dump.main(['-h', sys.argv[1]])\n"
            "sys.stdout.flush()\nheavy = ('re', 'json', 'typing', 'argparse', 'numpy', 'dataclasses', 'threading',"
            " 'enum')\n"
            "sys.stderr.write(' '.join(m for m in heavy if m in sys.modules))\nsys.exit(code)\n")
    done = subprocess.run([sys.executable, "-S", "-c", code, str(plain)], capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.startswith(b"netcdf plain {")
