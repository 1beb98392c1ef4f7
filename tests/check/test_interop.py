"""Each interop prediction of nczarr-check, backed by running that peer on the exact layouts it fires on.

For every NCZ-INTEROP-* rule: each layout (flavor) it fires on is built and the peer is run, asserting the
peer's precise behaviour (exit code, error text, or the wrong values); and a layout where it does not fire is
one where the same peer succeeds, so a rule that fires where the peer succeeds, or stays silent where the peer
fails, makes a test here fail.
"""
from __future__ import annotations

import json
import subprocess
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.checker import RULES, check
from nczarr_conformance.errors import FormatError
from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable
from nczarr_conformance.nczarr.attrs import json_attributes
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.peers import netcdf4
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.urls import to_file_url
from tests.conftest import require_module, require_tool

pytestmark = pytest.mark.peer

SIGSEGV = -11
FLAVORS = ("nczarr-4.10", "nczarr-2-upper", "zarr")


def _write(tmp_path: Path, root: Group, flavor: str, name: str) -> Path:
    path = tmp_path / f"{name}-{flavor}.file"
    with DirectoryStore(path, "w") as store:
        write_dataset(Dataset(root), store, flavor=flavor)
    return path


def _ints() -> Group:
    root = Group({"x": Dimension(4)})
    root.variables["v"] = Variable("int", ["/x"], (4,), {}, np.arange(4, dtype="i4"))
    return root


def _edit(path: Path, key: str, change) -> None:
    """Change one object; the .zmetadata goes (it would still show the old object to readers that use it)."""
    doc = json.loads((path / key).read_text())
    change(doc)
    (path / key).write_text(json.dumps(doc))
    (path / ".zmetadata").unlink(missing_ok=True)


def _ncdump(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_tool("ncdump"), to_file_url(str(path), "file")], capture_output=True, text=True,
                          timeout=60)


def _rules(path: Path) -> set[str]:
    return {f.rule for f in check(str(path), deep=True).findings}


def _url(path: Path, mode: str = "nczarr") -> str:
    return to_file_url(str(path), "file", mode) if mode != "nczarr" else to_file_url(str(path), "file")


# ---- netcdf-c 4.9.0 (Debian ncdump) ---------------------------------------------------------------

@pytest.mark.parametrize("flavor", FLAVORS)
def test_490_reads_the_base_int_variable_in_every_layout(tmp_path, flavor):
    path = _write(tmp_path, _ints(), flavor, "base")
    # NCZ-INTEROP-C490-KEYS speaks of the attributes 4.9.0 shows, not the values (test_c490_keys)
    assert not {r for r in _rules(path) if r.startswith("NCZ-INTEROP-C490") and r != "NCZ-INTEROP-C490-KEYS"}
    out = _ncdump(path)
    assert (out.returncode, " v = 0, 1, 2, 3 ;" in out.stdout) == (0, True), out.stderr


def _unlimited() -> Group:
    root = Group({"t": Dimension(4, True)})
    root.variables["v"] = Variable("int", ["/t"], (4,), {}, np.arange(4, dtype="i4"), chunks=[2])
    return root


def test_c490_unlimited_fires_on_the_upper_case_layout_where_490_crashes(tmp_path):
    # our writer refuses unlimited in this layout (4.9.0's ncgen cannot write one either): mark it by hand
    path = _write(tmp_path, _ints(), "nczarr-2-upper", "u")
    _edit(path, ".zgroup", lambda d: d["_NCZARR_GROUP"]["dims"].update(x={"size": 4, "unlimited": 1}))
    assert "NCZ-INTEROP-C490-UNLIMITED" in _rules(path)
    assert _ncdump(path).returncode == SIGSEGV


def test_c490_unlimited_is_silent_on_the_410_layout_which_490_reads(tmp_path):
    path = _write(tmp_path, _unlimited(), "nczarr-4.10", "u")
    assert "NCZ-INTEROP-C490-UNLIMITED" not in _rules(path)
    out = _ncdump(path)
    assert (out.returncode, " v = 0, 1, 2, 3 ;" in out.stdout) == (0, True), out.stderr


def _strings() -> Group:
    root = Group({"x": Dimension(2)})
    root.variables["s"] = Variable("string", ["/x"], (2,), {}, np.array(["ab", "c"], dtype=object))
    return root


@pytest.mark.parametrize("flavor", ("nczarr-4.10", "zarr"))
def test_c490_string(tmp_path, flavor):
    path = _write(tmp_path, _strings(), flavor, "s")
    assert "NCZ-INTEROP-C490-STRING" in _rules(path)
    assert _ncdump(path).returncode == SIGSEGV


def test_c490_string_upper_case_layout(tmp_path):
    path = _write(tmp_path, _ints(), "nczarr-2-upper", "s")  # our writer refuses strings there: make one
    _edit(path, "v/.zarray", lambda d: d.update(dtype="|S4"))
    (path / "v" / "0").write_bytes(b"abcd" * 4)
    assert "NCZ-INTEROP-C490-STRING" in _rules(path)
    assert _ncdump(path).returncode == SIGSEGV


def _scalar() -> Group:
    root = Group()
    root.variables["d"] = Variable("double", [], (), {}, np.array(2.5))
    return root


def test_c490_scalar_upper_case_layout_as_490_wrote_it(tmp_path):
    (tmp_path / "s.cdl").write_text("netcdf s { variables: double sc ; data: sc = 2.5 ; }")
    subprocess.run([require_tool("ncgen"), "-4", "-b", "-o", _url(tmp_path / "s.file"), str(tmp_path / "s.cdl")],
                   check=True, capture_output=True)
    assert "NCZ-INTEROP-C490-SCALAR" in _rules(tmp_path / "s.file")
    assert _ncdump(tmp_path / "s.file").returncode == SIGSEGV


def test_c490_scalar_zarr_shape_empty(tmp_path):
    path = _write(tmp_path, _scalar(), "zarr", "s")
    assert json.loads((path / "d" / ".zarray").read_text())["shape"] == []
    assert "NCZ-INTEROP-C490-SCALAR" in _rules(path)
    assert _ncdump(path).returncode == SIGSEGV


def test_c490_scalar_is_silent_on_the_410_layout_which_490_reads(tmp_path):
    path = _write(tmp_path, _scalar(), "nczarr-4.10", "s")
    assert "NCZ-INTEROP-C490-SCALAR" not in _rules(path)
    out = _ncdump(path)
    assert (out.returncode, " d = 2.5 ;" in out.stdout) == (0, True), out.stderr


@pytest.mark.parametrize("flavor", FLAVORS)
def test_c490_codec(tmp_path, flavor):
    path = _write(tmp_path, _ints(), flavor, "z")
    _edit(path, "v/.zarray", lambda d: d.update(compressor={"id": "zlib", "level": 1}))
    chunk = path / "v" / "0"
    chunk.write_bytes(zlib.compress(chunk.read_bytes(), 1))
    assert "NCZ-INTEROP-C490-CODEC" in _rules(path)
    out = _ncdump(path)  # exit 0, the compressed bytes shown as the data
    assert (out.returncode, " v = 0, 1, 2, 3 ;" in out.stdout, " v = " in out.stdout) == (0, False, True)


def _chars() -> Group:
    root = Group({"x": Dimension(4)})
    root.variables["c"] = Variable("char", ["/x"], (4,), {}, np.array([b"a", b"b", b"c", b"d"], dtype="S1"))
    return root


@pytest.mark.parametrize("flavor", FLAVORS)
def test_c490_char(tmp_path, flavor):
    path = _write(tmp_path, _chars(), flavor, "c")
    if flavor == "nczarr-2-upper":
        assert json.loads((path / "c" / ".zarray").read_text())["dtype"] == "<U1"
        assert "NCZ-INTEROP-C490-CHAR" not in _rules(path)  # the way 4.9.0 wrote char: it reads it
        out = _ncdump(path)
        assert (out.returncode, ' c = "abcd" ;' in out.stdout) == (0, True), out.stdout
        _edit(path, "c/.zarray", lambda d: d.update(dtype=">S1"))
    if flavor == "zarr":  # pure Zarr writes char as |S1, which 4.9.0 takes for a string and crashes on as well
        assert json.loads((path / "c" / ".zarray").read_text())["dtype"] == "|S1"
        assert "NCZ-INTEROP-C490-CHAR" not in _rules(path) and "NCZ-INTEROP-C490-STRING" in _rules(path)
        assert _ncdump(path).returncode == SIGSEGV
        _edit(path, "c/.zarray", lambda d: d.update(dtype=">S1"))
    assert json.loads((path / "c" / ".zarray").read_text())["dtype"] == ">S1"
    assert "NCZ-INTEROP-C490-CHAR" in _rules(path)
    assert _ncdump(path).returncode == SIGSEGV


# ---- netcdf-c 4.10.1 (netCDF4-python) -----------------------------------------------------------

def test_c410_u1char(tmp_path):
    upper = _write(tmp_path, _chars(), "nczarr-2-upper", "c")
    assert "NCZ-INTEROP-C410-U1CHAR" in _rules(upper)
    with pytest.raises(FormatError, match=r"not a netCDF file netCDF4-python can open \(NetCDF: NCZarr error\)$"):
        netcdf4.read(_url(upper))
    current = _write(tmp_path, _chars(), "nczarr-4.10", "c")
    assert "NCZ-INTEROP-C410-U1CHAR" not in _rules(current)
    assert netcdf4.read(_url(current)).root.variables["c"].data.tobytes() == b"abcd"


def _typed() -> Group:
    root = Group({"x": Dimension(2)}, attributes={"s": Attribute("short", np.array([1]))})
    root.groups["g"] = Group({"y": Dimension(3)})
    root.groups["g"].variables["w"] = Variable("int", ["/g/y"], (3,), {}, np.arange(3, dtype="i4"))
    return root


def test_c410_upper(tmp_path):
    upper = _write(tmp_path, _typed(), "nczarr-2-upper", "t")
    assert "NCZ-INTEROP-C410-UPPER" in _rules(upper)
    theirs = netcdf4.read(_url(upper))
    assert (theirs.root.attributes["s"].type, theirs.root.groups["g"].dimensions) == ("int", {})
    current = _write(tmp_path, _typed(), "nczarr-4.10", "t")
    assert "NCZ-INTEROP-C410-UPPER" not in _rules(current)
    theirs = netcdf4.read(_url(current))
    assert (theirs.root.attributes["s"].type, list(theirs.root.groups["g"].dimensions)) == ("short", ["y"])
    # the upper-case layout with nothing to re-infer (an int attribute, no sub-group dimensions) reads right
    plain = Group({"x": Dimension(2)}, attributes={"i": Attribute("int", np.array([7], "i4"))})
    plain.variables["v"] = Variable("int", ["/x"], (2,), {}, np.arange(2, dtype="i4"))
    upper = _write(tmp_path, plain, "nczarr-2-upper", "plain")
    assert "NCZ-INTEROP-C410-UPPER" not in _rules(upper)
    theirs = netcdf4.read(_url(upper))
    assert (theirs.root.attributes["i"].type, theirs.root.attributes["i"].value.tolist()) == ("int", [7])


def _reserved_shown_by_netcdf_c(path: Path) -> dict[str, list[str]]:
    """.zattrs key → the _nczarr*/_NCZARR* names netCDF4-python's ncattrs() lists for that object (raw, not our
    adapter, which keeps them out of the model)."""
    netCDF4 = require_module("netCDF4")
    out: dict[str, list[str]] = {}

    def walk(nc, node: str) -> None:
        objects = [(node, nc), *((f"{node.rstrip('/')}/{n}", v) for n, v in nc.variables.items())]
        for where, obj in objects:
            names = [n for n in obj.ncattrs() if n.lower().startswith("_nczarr")]
            if names:
                out[f"{where.rstrip('/')}/.zattrs"] = names
        for name, sub in nc.groups.items():
            walk(sub, f"{node.rstrip('/')}/{name}")

    with netCDF4.Dataset(_url(path)) as nc:
        walk(nc, "/")
    return out


def _reserved_findings(path: Path) -> dict[str, str]:
    return {f.key: f.message for f in check(str(path), deep=True).findings if f.rule == "NCZ-INTEROP-C410-RESERVED"}


def test_c410_reserved(tmp_path):
    """The rule fires on exactly the objects where netcdf-c 4.10.1 shows a reserved name, naming those names."""
    root = _typed()
    root.groups["g"].variables["s"] = Variable("string", ["/g/y"], (3,), {}, np.array(["a", "b" * 200, ""], object))
    clean = _write(tmp_path, root, "nczarr-4.10", "r")
    assert _reserved_findings(clean) == {} and _reserved_shown_by_netcdf_c(clean) == {}
    _edit(clean, "g/s/.zattrs", lambda d: d.update(_nczarr_maxstrlen=200))  # as our writer did before issue 34
    _edit(clean, ".zattrs", lambda d: d.update(_nczarr_default_maxstrlen=64))
    _edit(clean, "g/.zattrs", lambda d: d.update(_nczarr_x=1, _NCZARR_ATTR={"types": {}}))
    shown = _reserved_shown_by_netcdf_c(clean)
    assert shown == {"/g/s/.zattrs": ["_nczarr_maxstrlen"], "/.zattrs": ["_nczarr_default_maxstrlen"],
                     "/g/.zattrs": ["_nczarr_x", "_NCZARR_ATTR"]}
    found = _reserved_findings(clean)
    assert set(found) == set(shown) and all(all(n in found[k] for n in names) for k, names in shown.items())
    upper = _write(tmp_path, _typed(), "nczarr-2-upper", "r")  # its _NCZARR_ATTR, where there are attributes
    shown = _reserved_shown_by_netcdf_c(upper)
    assert shown == {"/.zattrs": ["_NCZARR_ATTR"]}
    assert _reserved_findings(upper) == {"/.zattrs": "netcdf-c 4.10.1 shows _NCZARR_ATTR as user attribute"}


def test_c410_jsonchar(tmp_path):
    root = Group(attributes={"answer": Attribute("char", "42"), "text": Attribute("char", "hello")})
    with json_attributes("spec"):  # the default writes "42" as a JSON string, which every reader reads back
        path = _write(tmp_path, root, "nczarr-4.10", "j")
    findings = [f for f in check(str(path), deep=True).findings if f.rule == "NCZ-INTEROP-C410-JSONCHAR"]
    assert [f.message for f in findings] == ["netcdf-c 4.10.1 reads char attribute 'answer' = 42 as one character"]
    attrs = netcdf4.read(_url(path)).root.attributes
    assert (attrs["answer"].value, attrs["text"].value) == ("4", "hello")  # the text it does not flag reads right


def test_c410_zarrscalar(tmp_path):
    zarr = require_module("zarr")
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w", zarr_format=2)
    g.create_array("s", shape=(), dtype="<f8", fill_value=0.0)[...] = 1.25
    g.create_array("a", shape=(1,), dtype="<f8", fill_value=0.0)[...] = 1.5
    findings = [f.key for f in check(str(tmp_path / "s.zarr"), deep=True).findings
                if f.rule == "NCZ-INTEROP-C410-ZARRSCALAR"]
    assert findings == ["/s/.zarray"]
    seen = netcdf4.read(_url(tmp_path / "s.zarr", "zarr")).root.variables
    assert ("s" in seen, seen["a"].data.tolist()) == (False, [1.5])
    ours = _write(tmp_path, _scalar(), "zarr", "s")
    assert "NCZ-INTEROP-C410-ZARRSCALAR" in _rules(ours)
    assert "d" not in netcdf4.read(_url(ours, "zarr")).root.variables
    current = _write(tmp_path, _scalar(), "nczarr-4.10", "s")
    assert "NCZ-INTEROP-C410-ZARRSCALAR" not in _rules(current)
    assert float(netcdf4.read(_url(current)).root.variables["d"].data) == 2.5


def test_c410_bigendian(tmp_path):
    root = Group({"x": Dimension(4)})
    root.variables["v"] = Variable("double", ["/x"], (4,), {"_FillValue": Attribute("double", np.array([1.5]))},
                                   np.array([0.5, 1.0, 1.5, 1.5]), chunks=[2], endianness="big")
    path = _write(tmp_path, root, "nczarr-4.10", "be")
    assert "NCZ-INTEROP-C410-BIGENDIAN" not in _rules(path)  # we write every chunk: it reads right
    assert netcdf4.read(_url(path)).root.variables["v"].data.tolist() == [0.5, 1.0, 1.5, 1.5]
    (path / "v" / "1").unlink()
    assert "NCZ-INTEROP-C410-BIGENDIAN" in _rules(path)
    data = netcdf4.read(_url(path)).root.variables["v"].data
    swapped = np.array([1.5], ">f8").view("<f8")[0]  # the fill's bytes read in the wrong order
    assert data.tolist() == [0.5, 1.0, swapped, swapped]


def _zarr_python_store(path: Path, dtype: str, values, **kw) -> Path:
    """A zarr-python store: an int array ``ok`` and one array ``bad`` of ``dtype``."""
    zarr = require_module("zarr")
    g = zarr.open_group(str(path), mode="w", zarr_format=2)
    ok = g.create_array("ok", shape=(3,), dtype="<i4", compressors=None)
    ok[...] = [1, 2, 3]
    ok.attrs["_ARRAY_DIMENSIONS"] = ["x"]
    bad = g.create_array("bad", shape=np.shape(values), dtype=dtype, **kw)
    bad[...] = values
    bad.attrs["_ARRAY_DIMENSIONS"] = ["bx", "by"][:np.ndim(values)]
    return path


C410_OPEN_FAILS = r"not a netCDF file netCDF4-python can open \(NetCDF: NCZarr error\)$"
REFUSED_DTYPES = {"<U5": np.array(["ab", "cde", "f"]), "<U1": np.array(["a", "b", "c"]),
                  "|b1": np.array([True, False, True]), "<f2": np.array([1, 2, 3], "<f2"),
                  "<c8": np.array([1, 2, 3], "<c8")}


@pytest.mark.parametrize("dtype", REFUSED_DTYPES)
def test_c410_dtype_pure_zarr(tmp_path, dtype):
    path = _zarr_python_store(tmp_path / "d.zarr", dtype, REFUSED_DTYPES[dtype], compressors=None)
    assert "NCZ-INTEROP-C410-DTYPE" in _rules(path)
    with pytest.raises(FormatError, match=C410_OPEN_FAILS):
        netcdf4.read(_url(path, "zarr"))  # the whole dataset, for one array
    silent = _zarr_python_store(tmp_path / "i.zarr", "<i2", np.array([1, 2, 3], "<i2"), compressors=None)
    assert "NCZ-INTEROP-C410-DTYPE" not in _rules(silent)
    assert netcdf4.read(_url(silent, "zarr")).root.variables["bad"].data.tolist() == [1, 2, 3]


def test_c410_dtype_object_strings(tmp_path):
    """zarr-python's (and kerchunk's, VirtualiZarr's) variable-length strings, |O + vlen-utf8: our reader takes them
    as netCDF string (tests/nczarr/test_vlen_strings.py), netcdf-c 4.10.1 does not open the dataset at all."""
    path = _zarr_python_store(tmp_path / "o.zarr", str, np.array(["ab", "cde", "f"], dtype=object), compressors=None)
    assert json.loads((path / "bad" / ".zarray").read_text())["dtype"] == "|O"
    rules = _rules(path)
    assert "NCZ-INTEROP-C410-DTYPE" in rules and "NCZ-ARRAY-DTYPE" not in rules
    with pytest.raises(FormatError, match=C410_OPEN_FAILS):
        netcdf4.read(_url(path, "zarr"))


@pytest.mark.parametrize("dtype,raw", [("|b1", b"\x01\x00\x01\x00"), ("<f2", np.arange(4, dtype="<f2").tobytes()),
                                       ("<U1", "abcd".encode("utf-32-le"))])
def test_c410_dtype_nczarr(tmp_path, dtype, raw):
    path = _write(tmp_path, _ints(), "nczarr-4.10", "d")
    _edit(path, "v/.zarray", lambda d: d.update(dtype=dtype, fill_value=None))
    (path / "v" / "0").write_bytes(raw)
    rules = _rules(path)
    # <U1 in NCZarr is netcdf-c 4.9.0's char: NCZ-INTEROP-C410-U1CHAR says it, once
    assert ("NCZ-INTEROP-C410-DTYPE" in rules, "NCZ-INTEROP-C410-U1CHAR" in rules) == (dtype != "<U1", dtype == "<U1")
    with pytest.raises(FormatError, match=C410_OPEN_FAILS):
        netcdf4.read(_url(path))


@pytest.mark.parametrize("codec", ["gzip", "lz4", "lzma", "delta"])
def test_c410_codec(tmp_path, codec):
    numcodecs = require_module("numcodecs")
    made = {"gzip": numcodecs.GZip(1), "lz4": numcodecs.LZ4(), "lzma": numcodecs.LZMA(),
            "delta": numcodecs.Delta("<i4")}
    kw = {"filters": [made[codec]], "compressors": None} if codec == "delta" else {"compressors": made[codec]}
    path = _zarr_python_store(tmp_path / "c.zarr", "<i4", np.array([4, 5, 6], "<i4"), **kw)
    findings = [f.message for f in check(str(path), deep=True).findings if f.rule == "NCZ-INTEROP-C410-CODEC"]
    assert findings == [f"netcdf-c 4.10.1 cannot read this variable's data: no codec {codec} (undefined filter)"]
    import netCDF4

    with netCDF4.Dataset(_url(path, "zarr")) as nc:
        assert sorted(nc.variables) == ["bad", "ok"]  # listed: only its data fail
        assert nc["ok"][:].tolist() == [1, 2, 3]
        with pytest.raises(RuntimeError, match="NetCDF: Filter error: undefined filter encountered"):
            nc["bad"][:]


@pytest.mark.parametrize("codec", ["zlib", "zstd", "blosc", "bz2", "shuffle"])
def test_c410_codec_is_silent_on_codecs_netcdf_c_has(tmp_path, codec):
    numcodecs = require_module("numcodecs")
    made = {"zlib": numcodecs.Zlib(1), "zstd": numcodecs.Zstd(1), "blosc": numcodecs.Blosc(), "bz2": numcodecs.BZ2(1),
            "shuffle": numcodecs.Shuffle(4)}
    kw = {"filters": [made[codec]], "compressors": None} if codec == "shuffle" else {"compressors": made[codec]}
    path = _zarr_python_store(tmp_path / "c.zarr", "<i4", np.array([4, 5, 6], "<i4"), **kw)
    assert "NCZ-INTEROP-C410-CODEC" not in _rules(path)
    assert netcdf4.read(_url(path, "zarr")).root.variables["bad"].data.tolist() == [4, 5, 6]


def test_c410_forder(tmp_path):
    values = np.arange(6, dtype="<i4").reshape(2, 3)
    path = _zarr_python_store(tmp_path / "f.zarr", "<i4", values, compressors=None, order="F")
    assert json.loads((path / "bad" / ".zarray").read_text())["order"] == "F"
    assert "NCZ-INTEROP-C410-FORDER" in _rules(path)
    # the chunk's Fortran-order bytes taken as C order
    assert netcdf4.read(_url(path, "zarr")).root.variables["bad"].data.tolist() == \
        values.ravel(order="F").reshape(2, 3).tolist()
    for order, shape_values in (("C", values), ("F", np.arange(3, dtype="<i4"))):  # F on one axis is C
        silent = _zarr_python_store(tmp_path / f"{order}{shape_values.ndim}.zarr", "<i4", shape_values,
                                    compressors=None, order=order)
        assert "NCZ-INTEROP-C410-FORDER" not in _rules(silent)
        assert netcdf4.read(_url(silent, "zarr")).root.variables["bad"].data.tolist() == shape_values.tolist()


def test_c410_purechar(tmp_path):
    """Every pure-Zarr char layout the rule fires on, netCDF4-python reads as string and we as char: ours
    (``--flavor zarr``: |S1; ``char_as=">S1"``: App. E's >S1), netcdf-c's own (>S1) and zarr-python's (|S1)."""
    import netCDF4
    zarr = require_module("zarr")

    layouts = {"ours-zarr": _write(tmp_path, _chars(), "zarr", "c")}
    with DirectoryStore(tmp_path / "ours-gt.file", "w") as store:
        write_dataset(Dataset(_chars()), store, flavor="zarr", char_as=">S1")
    layouts["ours-zarr->S1"] = tmp_path / "ours-gt.file"
    layouts["netcdf-c"] = tmp_path / "theirs.file"
    with netCDF4.Dataset(_url(layouts["netcdf-c"], "zarr"), "w") as nc:  # netcdf-c's own pure-Zarr char
        nc.createDimension("x", 4)
        nc.createVariable("c", "S1", ("x",))[:] = np.array([b"a", b"b", b"c", b"d"])
    layouts["zarr-python"] = tmp_path / "zp.zarr"
    group = zarr.open_group(str(layouts["zarr-python"]), mode="w", zarr_format=2)
    arr = group.create_array("c", shape=(4,), dtype="S1", fill_value=b"", compressors=None,
                             attributes={"_ARRAY_DIMENSIONS": ["x"]})
    arr[...] = np.array([b"a", b"b", b"c", b"d"])
    dtypes = {name: json.loads((path / "c" / ".zarray").read_text())["dtype"] for name, path in layouts.items()}
    assert dtypes == {"ours-zarr": "|S1", "ours-zarr->S1": ">S1", "netcdf-c": ">S1", "zarr-python": "|S1"}
    for name, path in layouts.items():
        assert "NCZ-INTEROP-C410-PURECHAR" in _rules(path), name
        var = netcdf4.read(_url(path, "zarr")).root.variables["c"]
        assert (var.type, var.data.tolist()) == ("string", ["a", "b", "c", "d"]), name
        assert open_dataset(str(path)).root.variables["c"].type == "char", name
    nczarr = _write(tmp_path, _chars(), "nczarr-4.10", "c")
    assert "NCZ-INTEROP-C410-PURECHAR" not in _rules(nczarr)
    assert netcdf4.read(_url(nczarr)).root.variables["c"].type == "char"


@pytest.mark.parametrize("writer", ["xarray", "zarr-python"])
def test_c490_codec_on_stores_written_by_xarray_and_zarr_python(tmp_path, writer):
    """netcdf-c issues #2252, #2449, #2484: 4.9.0 shows the compressed bytes of their default codecs as data."""
    path = tmp_path / "x.zarr"
    if writer == "xarray":
        xr = require_module("xarray")
        xr.Dataset({"v": ("x", np.arange(4, dtype="<i4"))}).to_zarr(str(path), mode="w", zarr_format=2)
    else:
        zarr = require_module("zarr")
        arr = zarr.open_group(str(path), mode="w", zarr_format=2).create_array("v", shape=(4,), dtype="<i4")
        arr[...] = np.arange(4)
    assert json.loads((path / "v" / ".zarray").read_text())["compressor"] is not None  # their default
    assert "NCZ-INTEROP-C490-CODEC" in _rules(path)
    out = subprocess.run([require_tool("ncdump"), _url(path, "zarr")], capture_output=True, text=True, timeout=60)
    assert (out.returncode, " v = 0, 1, 2, 3 ;" in out.stdout, " v = " in out.stdout) == (0, False, True)


def test_attr_quantize(tmp_path):
    import netCDF4

    with netCDF4.Dataset(_url(tmp_path / "q.file"), "w") as nc:
        nc.createDimension("x", 3)
        q = nc.createVariable("q", "f4", ("x",), significant_digits=3)
        q[:] = [1.23456, 2.34567, 3.45678]
    zattrs = json.loads((tmp_path / "q.file" / "q" / ".zattrs").read_text())
    assert zattrs["_QuantizeBitGroomNumberOfSignificantDigits"] == 3
    assert "_QuantizeBitGroomNumberOfSignificantDigits" not in zattrs["_nczarr_attr"]["types"]  # untyped
    rules = _rules(tmp_path / "q.file")
    assert ("NCZ-ATTR-QUANTIZE" in rules, "NCZ-ATTR-UNTYPED" in rules) == (True, False)
    attr = netcdf4.read(_url(tmp_path / "q.file")).root.variables["q"].attributes[
        "_QuantizeBitGroomNumberOfSignificantDigits"]
    assert (attr.type, attr.value.tolist()) == ("int", [3])  # netcdf-c reads its untyped value back as int
    _edit(tmp_path / "q.file", "q/.zattrs", lambda d: d.update(other=3))  # any other untyped one still warns
    rules = _rules(tmp_path / "q.file")
    assert ("NCZ-ATTR-QUANTIZE" in rules, "NCZ-ATTR-UNTYPED" in rules) == (True, True)


def _consolidated_then_modified(path: Path) -> None:
    """netCDF4-python writes ``path`` consolidated, then edits it without consolidated (as netcdf-c does by
    default): .zmetadata keeps the old attributes."""
    import os

    import netCDF4

    with netCDF4.Dataset(_url(path, "nczarr,consolidated"), "w") as nc:
        nc.createDimension("x", 2)
        v = nc.createVariable("v", "f4", ("x",))
        v[:] = [1, 2]
        v.units = "m"
        nc.title = "old"
    exists = os.path.exists
    try:  # netCDF4-python recreates a file it cannot os.stat: a URL opened "r+" would be clobbered
        os.path.exists = lambda p: True
        with netCDF4.Dataset(_url(path), "r+") as nc:
            nc.title = "new"
            nc["v"].units = "km"
            nc["v"].long_name = "added"
    finally:
        os.path.exists = exists


def test_consolidated_match_stale_after_netcdf_c_edit(tmp_path):
    path = tmp_path / "c.file"
    _consolidated_then_modified(path)
    findings = [(f.severity.value, f.key, f.message) for f in check(str(path), deep=True).findings
                if f.rule == "NCZ-CONSOLIDATED-MATCH"]
    tail = ": readers using .zmetadata (ours by default, netcdf-c with mode=consolidated) see other metadata than " \
           "readers that do not (netcdf-c by default)"
    assert findings == [
        ("error", "/.zmetadata", "entry /.zattrs is stale, it differs from the object in title" + tail),
        ("error", "/.zmetadata", "entry /v/.zattrs is stale, it differs from the object in _nczarr_attr, "
                                 "+long_name, units" + tail)]
    by_default = netcdf4.read(_url(path)).root
    consolidated = netcdf4.read(_url(path, "nczarr,consolidated")).root
    assert (by_default.attributes["title"].value, by_default.variables["v"].attributes["units"].value) == ("new", "km")
    assert (consolidated.attributes["title"].value, consolidated.variables["v"].attributes["units"].value) == \
        ("old", "m")
    ours = open_dataset(str(path)).root  # .zmetadata by default: what netcdf-c shows with mode=consolidated
    assert (ours.attributes["title"].value, ours.variables["v"].attributes["units"].value) == ("old", "m")


def test_consolidated_match_is_silent_when_fresh(tmp_path):
    import netCDF4

    with netCDF4.Dataset(_url(tmp_path / "c.file", "nczarr,consolidated"), "w") as nc:
        nc.title = "t"
    assert (tmp_path / "c.file" / ".zmetadata").exists()
    assert "NCZ-CONSOLIDATED-MATCH" not in _rules(tmp_path / "c.file")


# ---- zarr-python, xarray ------------------------------------------------------------------------

def test_zarr_char(tmp_path):
    """NCZarr char (>S1, Appendix E): zarr-python 3, xarray's open_zarr and open_datatree refuse the dataset;
    |S1 (our pure-Zarr default, or --char-as=S1) opens in all three, and the rule is silent there."""
    zarr = require_module("zarr")
    xr = require_module("xarray")
    root = _chars()
    root.variables["v"] = Variable("int", ["/x"], (4,), {}, np.arange(4, dtype="i4"))
    path = _write(tmp_path, root, "nczarr-4.10", "c")
    found = [f for f in check(str(path), deep=True).findings if f.rule == "NCZ-INTEROP-ZARR-CHAR"]
    assert [f.key for f in found] == ["/c/.zarray"]
    assert RULES["NCZ-INTEROP-ZARR-CHAR"].severity.value == "warning"
    assert all(name in found[0].message
               for name in ("zarr-python", "xarray", "--char-as=S1", "nczarr-fix --for xarray"))
    assert found[0].fix == "NCZ-FIX-CHAR-S1"  # the fix tests/fix/test_char_s1.py proves on xarray and zarr-python
    # no .zmetadata by default here: zarr-python opens the group and reads every other array ...
    assert not (path / ".zmetadata").exists()
    group = zarr.open_group(str(path), mode="r", zarr_format=2)
    assert group["v"][...].tolist() == [0, 1, 2, 3]
    refused = r"No Zarr data type found that matches \{'name': '>S1'"
    with pytest.raises(ValueError, match=refused):
        group["c"][...]
    with pytest.raises(ValueError, match=refused):  # xarray refuses the whole dataset, for one char array
        xr.open_zarr(str(path), consolidated=False, zarr_format=2)
    with pytest.raises(ValueError, match=refused):
        xr.open_datatree(str(path), engine="zarr", zarr_format=2)
    # ... where through a .zmetadata zarr-python refuses the whole group
    forced = tmp_path / "forced.file"
    with DirectoryStore(forced, "w") as store:
        write_dataset(Dataset(root), store, consolidate=True)
    with pytest.raises(ValueError, match=refused):
        zarr.open_group(str(forced), mode="r", zarr_format=2)
    for flavor, char_as in (("nczarr-4.10", "S1"), ("zarr", None)):
        out = tmp_path / f"s1-{flavor}.file"
        with DirectoryStore(out, "w") as store:
            write_dataset(Dataset(root), store, flavor=flavor, char_as=char_as)
        assert json.loads((out / "c" / ".zarray").read_text())["dtype"] == "|S1"
        assert "NCZ-INTEROP-ZARR-CHAR" not in _rules(out)
        expected = [b"a", b"b", b"c", b"d"]
        assert zarr.open_group(str(out), mode="r", zarr_format=2)["c"][...].tolist() == expected
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # consolidated: no "falling back to non-consolidated" warning
            ds = xr.open_zarr(str(out), consolidated=True, zarr_format=2, decode_cf=False)
            assert ds["c"].values.tolist() == expected and ds["v"].values.tolist() == [0, 1, 2, 3]
            tree = xr.open_datatree(str(out), engine="zarr", zarr_format=2, decode_cf=False)
            assert tree["c"].values.tolist() == expected
    del root.variables["c"]
    without = _write(tmp_path, root, "nczarr-4.10", "n")
    assert "NCZ-INTEROP-ZARR-CHAR" not in _rules(without)
    assert xr.open_zarr(str(without), consolidated=False, zarr_format=2)["v"].values.tolist() == [0, 1, 2, 3]


def test_zarr_i1(tmp_path):
    zarr = require_module("zarr")
    root = Group({"x": Dimension(2)})
    root.variables["b"] = Variable("byte", ["/x"], (2,), {}, np.array([1, -1], dtype="i1"))
    netcdf4.write(Dataset(root), to_file_url(str(tmp_path / "n.file"), "file"))
    assert json.loads((tmp_path / "n.file" / "b" / ".zarray").read_text())["dtype"] == "<i1"
    assert "NCZ-INTEROP-ZARR-I1" in _rules(tmp_path / "n.file")
    with pytest.raises(ValueError, match=r"No Zarr data type found that matches \{'name': '<i1'"):
        zarr.open_group(str(tmp_path / "n.file"), mode="r", zarr_format=2)["b"][...]
    ours = _write(tmp_path, root, "nczarr-4.10", "b")
    assert json.loads((ours / "b" / ".zarray").read_text())["dtype"] == "|i1"
    assert "NCZ-INTEROP-ZARR-I1" not in _rules(ours)
    assert zarr.open_group(str(ours), mode="r", zarr_format=2)["b"][...].tolist() == [1, -1]


def _shuffled() -> Group:
    root = Group({"x": Dimension(8)})
    root.variables["i"] = Variable("int", ["/x"], (8,), {}, np.arange(8, dtype="i4") * 1000,
                                   filters=[{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 1}])
    return root


def test_shuffle0(tmp_path):
    zarr = require_module("zarr")
    netcdf4.write(Dataset(_shuffled()), to_file_url(str(tmp_path / "s.file"), "file"))
    filters = json.loads((tmp_path / "s.file" / "i" / ".zarray").read_text())["filters"]
    assert filters == [{"id": "shuffle", "elementsize": 0}]
    assert "NCZ-INTEROP-SHUFFLE0" in _rules(tmp_path / "s.file")
    values = zarr.open_group(str(tmp_path / "s.file"), mode="r", zarr_format=2)["i"][...]
    # numcodecs skips the un-shuffle, so the still-shuffled bytes come back as the values
    shuffled = (np.arange(8, dtype="<i4") * 1000).view("u1").reshape(8, 4).T.copy().view("<i4").reshape(-1)
    assert values.tolist() == shuffled.tolist()
    ours = _write(tmp_path, _shuffled(), "nczarr-4.10", "s")
    assert "NCZ-INTEROP-SHUFFLE0" not in _rules(ours)
    assert zarr.open_group(str(ours), mode="r", zarr_format=2)["i"][...].tolist() == list(range(0, 8000, 1000))


def test_xarray_nodims(tmp_path):
    zarr = require_module("zarr")
    xr = require_module("xarray")
    g = zarr.open_group(str(tmp_path / "z.zarr"), mode="w", zarr_format=2)
    g.create_array("a", shape=(3,), dtype="<i4", fill_value=0)[...] = 1
    assert "NCZ-INTEROP-XARRAY-NODIMS" in _rules(tmp_path / "z.zarr")
    with pytest.raises(KeyError, match=r"missing the attribute `_ARRAY_DIMENSIONS`"):
        xr.open_zarr(str(tmp_path / "z.zarr"), consolidated=False, zarr_format=2)
    g["a"].attrs["_ARRAY_DIMENSIONS"] = ["x"]
    assert "NCZ-INTEROP-XARRAY-NODIMS" not in _rules(tmp_path / "z.zarr")
    assert xr.open_zarr(str(tmp_path / "z.zarr"), consolidated=False, zarr_format=2)["a"].values.tolist() == [1, 1, 1]


# ---- TensorStore and the rounded default fill (rules in checker/readers.py) --------------------------

def _ts_open(path: Path, array: str):
    ts = require_module("tensorstore")
    return ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}, "path": array},
                   read=True).result()


def test_ts_filters(tmp_path):
    netcdf4.write(Dataset(_shuffled()), to_file_url(str(tmp_path / "s.file"), "file"))
    assert "NCZ-INTEROP-TS-FILTERS" in _rules(tmp_path / "s.file")
    with pytest.raises(ValueError, match="filters are not supported"):
        _ts_open(tmp_path / "s.file", "i")
    ours = _write(tmp_path, _ints(), "nczarr-4.10", "plain")  # no filters: TensorStore reads it
    assert "NCZ-INTEROP-TS-FILTERS" not in _rules(ours)
    assert _ts_open(ours, "v").read().result().tolist() == [0, 1, 2, 3]


def _strings() -> Group:
    root = Group({"x": Dimension(2)})
    root.variables["s"] = Variable("string", ["/x"], (2,), {}, np.array(["a", "bc"], dtype=object))
    return root


def test_ts_stringfill(tmp_path):
    netcdf4.write(Dataset(_strings()), to_file_url(str(tmp_path / "n.file"), "file"))
    assert json.loads((tmp_path / "n.file" / "s" / ".zarray").read_text())["fill_value"] == ""
    assert "NCZ-INTEROP-TS-STRINGFILL" in _rules(tmp_path / "n.file")
    with pytest.raises(ValueError, match='Error parsing object member "fill_value": Expected 128 base64'):
        _ts_open(tmp_path / "n.file", "s")
    _edit(tmp_path / "n.file", "s/.zarray", lambda d: d.update(fill_value=None))
    assert "NCZ-INTEROP-TS-STRINGFILL" not in _rules(tmp_path / "n.file")
    assert _ts_open(tmp_path / "n.file", "s").shape[0] == 2  # opens (its Python binding shows |S bytes as S0)


def test_fill_rounded(tmp_path):
    zarr = require_module("zarr")
    write_partial_double(tmp_path / "n.file")
    assert json.loads((tmp_path / "n.file" / "d" / ".zarray").read_text())["fill_value"] == 9.96921e36
    assert "NCZ-FILL-ROUNDED" in _rules(tmp_path / "n.file")
    values = zarr.open_group(str(tmp_path / "n.file"), mode="r", zarr_format=2)["d"][...]
    assert values.tolist() == [1.0, 9.96921e36, 9.96921e36, 9.96921e36]  # not netCDF's default 9.969209968386869e36
    root = Group({"x": Dimension(4)})
    root.variables["d"] = Variable("double", ["/x"], (4,), {}, np.array([1.0] + [9.969209968386869e36] * 3),
                                   chunks=[1])
    ours = _write(tmp_path, root, "nczarr-4.10", "d")
    assert "NCZ-FILL-ROUNDED" not in _rules(ours)
    assert zarr.open_group(str(ours), mode="r", zarr_format=2)["d"][...].tolist() == [1.0] + [9.969209968386869e36] * 3


def write_partial_double(path: Path) -> None:
    """netCDF4-python: a double d(x=4) in chunks of 1 with only d[0] written, no _FillValue (the default fill)."""
    import netCDF4

    with netCDF4.Dataset(to_file_url(str(path), "file"), "w") as nc:
        nc.createDimension("x", 4)
        nc.createVariable("d", "f8", ("x",), chunksizes=(1,))[0] = 1.0


def test_every_interop_rule_has_a_test_here():
    """Each rule id appears in a test of this module that runs its peer (the tests above, by name)."""
    covered = {"NCZ-INTEROP-C490-UNLIMITED", "NCZ-INTEROP-C490-STRING", "NCZ-INTEROP-C490-SCALAR",
               "NCZ-INTEROP-C490-CODEC", "NCZ-INTEROP-C490-CHAR", "NCZ-INTEROP-C410-U1CHAR",
               "NCZ-INTEROP-C410-JSONCHAR", "NCZ-INTEROP-C410-ZARRSCALAR", "NCZ-INTEROP-C410-UPPER",
               "NCZ-INTEROP-C410-RESERVED",
               "NCZ-INTEROP-C410-BIGENDIAN", "NCZ-INTEROP-ZARR-CHAR", "NCZ-INTEROP-ZARR-I1", "NCZ-INTEROP-SHUFFLE0",
               "NCZ-INTEROP-XARRAY-NODIMS", "NCZ-INTEROP-C410-DTYPE", "NCZ-INTEROP-C410-CODEC",
               "NCZ-INTEROP-C410-FORDER", "NCZ-INTEROP-C410-PURECHAR", "NCZ-INTEROP-TS-FILTERS",
               "NCZ-INTEROP-TS-STRINGFILL", "NCZ-INTEROP-ZIP-LIBZIP", "NCZ-INTEROP-ZIP-NESTED",
               "NCZ-INTEROP-GDAL-SHUFFLE", "NCZ-INTEROP-C490-KEYS", "NCZ-INTEROP-C490-CHUNKOVER",
               "NCZ-INTEROP-U1CHAR-ZARR", "NCZ-INTEROP-GDAL-CHARNUL", "NCZ-INTEROP-TS-CHAR",
               "NCZ-INTEROP-GDAL-INT64ATTR", "NCZ-INTEROP-C490-BYTEORDER", "NCZ-INTEROP-C490-STRATTR",
               "NCZ-INTEROP-XARRAY-FILL", "NCZ-INTEROP-XARRAY-SCALAR", "NCZ-INTEROP-XARRAY-STRINGS",
               "NCZ-INTEROP-XARRAY-NANATTR", "NCZ-INTEROP-XARRAY-FLOATATTR"}
    assert {rid for rid in RULES if rid.startswith("NCZ-INTEROP-")} == covered


# ---- the zip layouts, GDAL's filters, netcdf-c 4.9.0 on the 4.9.1+ keys (issue 34) ---------------------------

def _zip_store(tmp_path: Path, *, top: bool) -> Path:
    from nczarr_conformance.stores.zip import ZipStore

    path = tmp_path / ("top.zip" if top else "nested.zip")
    store = ZipStore(path, "w")
    if top:
        store.entries_at_top()
    write_dataset(Dataset(_ints()), store)
    store.commit()
    store.close()
    return path


def test_zip_libzip(tmp_path):
    """netCDF4-python's netcdf-c cannot open a zip at all (no libzip); it opens the same dataset as a directory."""
    netCDF4 = require_module("netCDF4")
    zipped = _zip_store(tmp_path, top=False)
    assert "NCZ-INTEROP-ZIP-LIBZIP" in _rules(zipped)
    with pytest.raises(OSError, match="not turned on"):
        netCDF4.Dataset(to_file_url(str(zipped), "zip"))
    plain = _write(tmp_path, _ints(), "nczarr-4.10", "dir")
    assert "NCZ-INTEROP-ZIP-LIBZIP" not in _rules(plain)
    with netCDF4.Dataset(_url(plain)) as nc:
        assert nc["v"][:].tolist() == [0, 1, 2, 3]


def test_zip_nested(tmp_path):
    """zarr-python's ZipStore finds no group in netcdf-c's zip layout (the dataset in a folder); at the top it does."""
    zarr = require_module("zarr")
    nested, top = _zip_store(tmp_path, top=False), _zip_store(tmp_path, top=True)
    assert "NCZ-INTEROP-ZIP-NESTED" in _rules(nested)
    with pytest.raises(zarr.errors.GroupNotFoundError):
        zarr.open_group(zarr.storage.ZipStore(nested, mode="r"), mode="r")
    assert "NCZ-INTEROP-ZIP-NESTED" not in _rules(top)
    group = zarr.open_group(zarr.storage.ZipStore(top, mode="r"), mode="r")
    assert group["v"][:].tolist() == [0, 1, 2, 3]


def _ints_filtered(shuffle: bool) -> Group:
    root = _ints()
    root.variables["v"].filters = ([{"id": "shuffle", "elementsize": 4}] if shuffle else []) + [{"id": "zlib",
                                                                                                  "level": 1}]
    return root


def test_gdal_shuffle(tmp_path):
    """GDAL 3.6 leaves an array with the shuffle filter out of what it shows; without the filter it shows it."""
    require_tool("gdalmdiminfo")
    from nczarr_conformance.peers.base import PEERS

    gdal = PEERS["gdal"]
    shuffled = _write(tmp_path, _ints_filtered(True), "zarr", "shuffled")
    assert "NCZ-INTEROP-GDAL-SHUFFLE" in _rules(shuffled)
    assert "v" not in gdal.read(str(shuffled)).root.variables
    plain = _write(tmp_path, _ints_filtered(False), "zarr", "plain")
    assert "NCZ-INTEROP-GDAL-SHUFFLE" not in _rules(plain)
    assert np.asarray(gdal.read(str(plain)).root.variables["v"].data).tolist() == [0, 1, 2, 3]


def test_c490_keys(tmp_path):
    """ncdump 4.9.0 shows the 4.10 layout's _nczarr_* keys as attributes; in its own (upper-case) layout it shows
    none."""
    for flavor, fires in (("nczarr-4.10", True), ("nczarr-2-upper", False)):
        path = _write(tmp_path, _ints(), flavor, "keys")
        assert ("NCZ-INTEROP-C490-KEYS" in _rules(path)) is fires
        dumped = _ncdump(path)
        assert dumped.returncode == 0, dumped.stderr
        assert ("_nczarr" in dumped.stdout) is fires, dumped.stdout


def test_c490_chunkover(tmp_path):
    """ncdump 4.9.0 fails ("NCZarr error") on an array whose chunk is longer than its shape; capped, it reads it."""
    for chunks, fires in (([8], True), ([4], False)):
        root = Group({"t": Dimension(4, True)})
        root.variables["v"] = Variable("int", ["/t"], (4,), {}, np.arange(4, dtype="i4"), chunks=chunks)
        path = _write(tmp_path, root, "nczarr-4.10", f"over{chunks[0]}")
        assert ("NCZ-INTEROP-C490-CHUNKOVER" in _rules(path)) is fires
        dumped = _ncdump(path)
        if fires:
            assert dumped.returncode == 1 and "NCZarr error" in dumped.stderr, dumped.stderr
        else:
            assert dumped.returncode == 0 and " v = 0, 1, 2, 3 ;" in dumped.stdout, dumped.stderr



def _peer(peer_id: str):
    from nczarr_conformance.peers.base import PEERS

    peer = PEERS[peer_id]
    reason = peer.available()
    if reason:
        require_tool(peer_id) if peer_id == "gdal" else require_module(peer_id)
    return peer


def _char_grid() -> Group:
    root = Group({"x": Dimension(2), "n": Dimension(3)})
    root.variables["c"] = Variable("char", ["/x", "/n"], (2, 3), {}, np.array([[b"a", b"b", b""], [b"c", b"", b""]],
                                                                               "S1"))
    return root


def test_u1char_zarr(tmp_path):
    """netcdf-c 4.9.0's <U1 char: zarr-python (so xarray) fails on it; the 4.10 layout's >S1 aside, |S1 reads."""
    zarr_python = _peer("zarr-python")
    upper = _write(tmp_path, _char_grid(), "nczarr-2-upper", "u1")
    assert "NCZ-INTEROP-U1CHAR-ZARR" in _rules(upper)
    with pytest.raises(ValueError):  # "cannot reshape …" or "When changing to a larger dtype …", by shape
        zarr_python.read(str(upper))
    pure = _write(tmp_path, _char_grid(), "zarr", "u1")
    assert "NCZ-INTEROP-U1CHAR-ZARR" not in _rules(pure)
    assert np.asarray(zarr_python.read(str(pure)).root.variables["c"].data).ravel()[0] == b"a"


def test_gdal_charnul(tmp_path):
    """GDAL reads a char array's NUL bytes as "" (the rule is silent where there is no char array)."""
    gdal = _peer("gdal")
    path = _write(tmp_path, _char_grid(), "zarr", "nul")
    assert "NCZ-INTEROP-GDAL-CHARNUL" in _rules(path)
    values = [str(v) for v in np.ravel(gdal.read(str(path)).root.variables["c"].data)]
    assert values == ["a", "b", "", "c", "", ""]  # NUL read as the empty string
    assert "NCZ-INTEROP-GDAL-CHARNUL" not in _rules(_write(tmp_path, _ints(), "zarr", "nochar"))


def test_ts_char(tmp_path):
    """TensorStore reads a pure-Zarr |S1 char array as empty strings; the same bytes as |u1 it reads right."""
    ts = _peer("tensorstore")
    path = _write(tmp_path, _char_grid(), "zarr", "tschar")
    assert "NCZ-INTEROP-TS-CHAR" in _rules(path)
    values = [v for v in np.ravel(ts.read(str(path)).root.variables["c"].data)]
    assert values != [b"a", b"b", b"", b"c", b"", b""] and set(map(bytes, values)) <= {b""}, values
    assert "NCZ-INTEROP-TS-CHAR" not in _rules(_write(tmp_path, _ints(), "zarr", "tsnochar"))
    assert np.asarray(ts.read(str(_write(tmp_path, _ints(), "zarr", "tsints"))).root.variables["v"].data).tolist() \
        == [0, 1, 2, 3]


def _int64_attr(value: int) -> Group:
    root = _ints()
    root.variables["v"].attributes["big"] = Attribute("int64", np.array([value], "i8"))
    return root


def test_gdal_int64attr(tmp_path):
    """GDAL reads integer attributes as doubles: 2**62 + 1 comes back rounded; 2**40 + 1 exactly."""
    gdal = _peer("gdal")
    big = _write(tmp_path, _int64_attr(2**62 + 1), "zarr", "big")
    assert "NCZ-INTEROP-GDAL-INT64ATTR" in _rules(big)
    seen = gdal.read(str(big)).root.variables["v"].attributes["big"].value
    assert int(np.ravel(seen)[0]) != 2**62 + 1
    small = _write(tmp_path, _int64_attr(2**40 + 1), "zarr", "small")
    assert "NCZ-INTEROP-GDAL-INT64ATTR" not in _rules(small)
    assert int(np.ravel(gdal.read(str(small)).root.variables["v"].attributes["big"].value)[0]) == 2**40 + 1


def test_c490_byteorder(tmp_path):
    """ncdump 4.9.0 reads a pure-Zarr >f4 array byte-swapped; <f4 right."""
    for endianness, fires in (("big", True), ("little", False)):
        root = Group({"x": Dimension(2)})
        root.variables["f"] = Variable("float", ["/x"], (2,), {}, np.array([0.5, 2.0], "f4"), endianness=endianness)
        path = _write(tmp_path, root, "zarr", f"bo-{endianness}")
        assert ("NCZ-INTEROP-C490-BYTEORDER" in _rules(path)) is fires
        dumped = _ncdump(path)
        assert dumped.returncode == 0, dumped.stderr
        assert (" f = 0.5, 2 ;" in dumped.stdout) is not fires, dumped.stdout


def test_c490_strattr(tmp_path):
    """ncdump 4.9.0 cannot open a pure-Zarr store with a list-of-texts attribute; a single text it reads."""
    for attr, fires in ((Attribute("string", np.array(["a", "bb"], dtype=object)), True),
                        (Attribute("char", "a"), False)):
        root = _ints()
        root.attributes["sa"] = attr
        path = _write(tmp_path, root, "zarr", f"sa-{fires}")
        assert ("NCZ-INTEROP-C490-STRATTR" in _rules(path)) is fires
        dumped = _ncdump(path)
        if fires:
            assert dumped.returncode == 1 and "Invalid argument" in dumped.stderr, dumped.stderr
        else:
            assert dumped.returncode == 0 and " v = 0, 1, 2, 3 ;" in dumped.stdout, dumped.stderr


def _v3(tmp_path: Path, root: Group, name: str) -> Path:
    from nczarr_conformance.zarr3.writer import write_dataset as write_v3

    path = tmp_path / f"{name}.v3"
    with DirectoryStore(path, "w") as store:
        write_v3(Dataset(root), store)
    return path


def test_v3_gdal_and_tensorstore_text(tmp_path):
    """GDAL 3.6 shows no array of a Zarr v3 store; TensorStore refuses v3 char arrays and reads the numbers."""
    gdal, ts = _peer("gdal"), _peer("tensorstore")
    root = _char_grid()
    root.variables["v"] = Variable("int", ["/x"], (2,), {}, np.arange(2, dtype="i4"))
    path = _v3(tmp_path, root, "v3")
    findings = {(f.rule, f.key) for f in check(str(path)).findings}
    assert ("NCZ-V3-INTEROP-GDAL", "/zarr.json") in findings
    assert gdal.read(str(path)).root.variables == {}
    assert {k for r, k in findings if r == "NCZ-V3-INTEROP-TS-TEXT"} == {"/c/zarr.json"}
    with pytest.raises(ValueError, match="null_terminated_bytes"):
        ts.read(str(path))
    numbers = _v3(tmp_path, _ints(), "v3ints")
    assert not {f.rule for f in check(str(numbers)).findings} & {"NCZ-V3-INTEROP-TS-TEXT"}
    assert np.asarray(ts.read(str(numbers)).root.variables["v"].data).tolist() == [0, 1, 2, 3]



def _xarray_case(tmp_path: Path, name: str, build, **choices) -> tuple[set[str], list[str]]:
    """(rules fired, what xarray decodes differently from its netCDF4 engine) for a netCDF file ``build`` writes,
    converted with the layout ``choices``."""
    netCDF4 = require_module("netCDF4")
    require_module("xarray")
    from nczarr_conformance.conformance.verify import xarray_decoded_differences
    from nczarr_conformance.conversion.from_netcdf import convert

    src = tmp_path / f"{name}.nc"
    with netCDF4.Dataset(src, "w") as nc:
        build(nc)
    out = tmp_path / f"{name}-{'-'.join(f'{k}{v}' for k, v in choices.items())}.zarr"
    convert(str(src), str(out), choices=choices)
    return _rules(out), xarray_decoded_differences(str(out), str(src))


def _level(nc) -> None:
    nc.createDimension("x", 3)
    nc.createVariable("level", "i4", ("x",))[:] = [1, 2, -2147483647]


def _scalar_crs(nc) -> None:
    nc.createVariable("crs", "i4", fill_value=-1).assignValue(0)


def _strings_var(nc) -> None:
    nc.createDimension("x", 2)
    s = nc.createVariable("s", str, ("x",))
    s[:] = np.array(["", "ünï"], dtype=object)


def test_xarray_fill(tmp_path):
    """An int32 without _FillValue: xarray's zarr decoding gives float64 with NaN; fill_value null keeps int32."""
    fired, said = _xarray_case(tmp_path, "level", _level)
    assert "NCZ-INTEROP-XARRAY-FILL" in fired and "xarray: level: dtype float64 != int32 (netCDF4 engine)" in said
    fired, said = _xarray_case(tmp_path, "level", _level, default_fill="null")
    assert "NCZ-INTEROP-XARRAY-FILL" not in fired and said == []


def test_xarray_scalar(tmp_path):
    """NCZarr's shape-[1] scalar reads as a 1-element array along _scalar_; pure Zarr's shape [] as a scalar."""
    fired, said = _xarray_case(tmp_path, "crs", _scalar_crs)
    assert "NCZ-INTEROP-XARRAY-SCALAR" in fired and said == ["xarray: crs: dimensions ('_scalar_',) != () "
                                                           "(netCDF4 engine)"]
    fired, said = _xarray_case(tmp_path, "crs", _scalar_crs, flavor="zarr")
    assert "NCZ-INTEROP-XARRAY-SCALAR" not in fired and said == []


def test_xarray_strings(tmp_path):
    """Zarr v2 |Sn strings read as bytes, "" as NaN; Zarr v3's string type reads as text."""
    fired, said = _xarray_case(tmp_path, "s", _strings_var)
    assert "NCZ-INTEROP-XARRAY-STRINGS" in fired and said == ["xarray: s: values differ from the netCDF4 engine's"]
    fired, said = _xarray_case(tmp_path, "s", _strings_var, zarr_format=3)
    assert "NCZ-INTEROP-XARRAY-STRINGS" not in fired and said == []



def _nan_attr(nc) -> None:
    nc.createDimension("x", 2)
    v = nc.createVariable("v", "f4", ("x",), fill_value=-1.0)
    v[:] = [1.0, 2.0]
    v.missing = np.float32("nan")


def test_xarray_nanattr(tmp_path):
    """xarray gives a NaN float attribute back as the text "NaN"; a finite one as the float."""
    fired, said = _xarray_case(tmp_path, "nan", _nan_attr)
    assert "NCZ-INTEROP-XARRAY-NANATTR" in fired and said == ["xarray: v: attributes missing differ from the "
                                                            "netCDF4 engine's"]
    fired, said = _xarray_case(tmp_path, "finite", lambda nc: (_nan_attr(nc), nc["v"].setncattr("missing",
                                                                                                  np.float32(2.5))))
    assert "NCZ-INTEROP-XARRAY-NANATTR" not in fired and said == []



FLOAT32_TENTH = np.float32(0.1)


def _packed(nc, scale=FLOAT32_TENTH) -> None:
    nc.createDimension("x", 2)
    v = nc.createVariable("v", "i2", ("x",), fill_value=np.int16(-1))
    v.scale_factor = scale
    v[:] = [1.0, 2.0]


def test_xarray_floatattr(tmp_path):
    """A float32 scale_factor: xarray's zarr decoding gives float64 data; a double one float64 as netCDF4's engine."""
    fired, said = _xarray_case(tmp_path, "packed", _packed)
    assert "NCZ-INTEROP-XARRAY-FLOATATTR" in fired
    assert "xarray: v: dtype float64 != float32 (netCDF4 engine)" in said, said
    fired, said = _xarray_case(tmp_path, "packed64", lambda nc: _packed(nc, np.float64(0.1)))
    assert "NCZ-INTEROP-XARRAY-FLOATATTR" not in fired and said == []
