"""Debian's netcdf-c 4.9.0 (ncgen/ncdump/nccopy): reads our nczarr-2-upper output; we read what ncgen writes."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.errors import FormatError
from nczarr_conformance.model import (
    Attribute,
    Dataset,
    Dimension,
    Group,
    Variable,
    diff,
)
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.peers import netcdf4
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.testing.ignores import CONTIGUOUS, UPPER_FLAVOR
from nczarr_conformance.testing.source import read_source
from nczarr_conformance.urls import to_file_url
from tests.conftest import require_tool
from tests.peers.known import PeerStillWrong, still_wrong

pytestmark = pytest.mark.peer


def upper_compatible_model() -> Dataset:
    """Everything netcdf-c 4.9.0 can read: no strings, scalars or unlimited dimensions."""
    root = Group({"x": Dimension(4), "n": Dimension(3)})
    root.attributes = {"title": Attribute("char", "for 4.9.0"), "answer": Attribute("char", "42"),
                       "json": Attribute("char", '{"a": [1,2]}'),
                       "pi": Attribute("double", np.array([3.141592653589793])),
                       "shorts": Attribute("short", np.array([1, -2])),
                       "big": Attribute("uint64", np.array([2**64 - 1], "u8"))}
    for code, nctype in [("i1", "byte"), ("u1", "ubyte"), ("i2", "short"), ("u2", "ushort"), ("i4", "int"),
                         ("u4", "uint"), ("i8", "int64"), ("u8", "uint64"), ("f4", "float"), ("f8", "double")]:
        info = np.iinfo(code) if code[0] in "iu" else np.finfo(code)
        root.variables[nctype] = Variable(nctype, ["/x"], (4,), {}, np.array([info.min, info.max, 0, 1], code),
                                          chunks=[3])
    root.variables["chars"] = Variable("char", ["/x", "/n"], (4, 3), {},
                                       np.array([list(b"abc"), list(b"de\0"), list(b"\0\0\0"), list(b"xyz")],
                                                dtype="u1").view("S1"))
    root.variables["packed"] = Variable("int", ["/x", "/n"], (4, 3), {"_FillValue": Attribute("int", np.array([-9]))},
                                        np.arange(12, dtype="i4").reshape(4, 3), chunks=[2, 2],
                                        filters=[{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 2}])
    root.variables["big_endian"] = Variable("double", ["/x"], (4,), {}, np.array([0.5, -1, 2, 3], ">f8"),
                                            endianness="big")
    g = Group({"y": Dimension(2)}, attributes={"where": Attribute("char", "in g")})
    g.variables["w"] = Variable("ushort", ["/x", "/g/y"], (4, 2), {}, np.arange(8, dtype="u2").reshape(4, 2))
    root.groups["g"] = g
    return Dataset(root)


def _write_upper(tmp_path, *, chars: bool = True) -> tuple[Dataset, str]:
    model = upper_compatible_model()
    if not chars:
        del model.root.variables["chars"]
    with DirectoryStore(tmp_path / "up.file", "w") as store:
        write_dataset(model, store, flavor="nczarr-2-upper")
    return model, to_file_url(str(tmp_path / "up.file"), "file")


def test_netcdf_c_410_reads_upper_flavor_data(tmp_path):
    """What 4.10.1 does get right in an upper-case dataset: every value."""
    model, url = _write_upper(tmp_path, chars=False)
    theirs = netcdf4.read(url)
    for name, var in model.root.variables.items():
        assert np.array_equal(theirs.root.variables[name].data, var.data), name
    assert np.array_equal(theirs.root.groups["g"].variables["w"].data, model.root.groups["g"].variables["w"].data)


def test_ncdump_490_reads_our_upper_flavor(tmp_path):
    ncdump = require_tool("ncdump")
    _, url = _write_upper(tmp_path)
    out = subprocess.run([ncdump, url], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert ':answer = "42" ;' in out.stdout and "big_endian = 0.5, -1, 2, 3 ;" in out.stdout
    assert ' chars =\n  "abc",\n  "de",\n  "",\n  "xyz" ;' in out.stdout


def test_netcdf_c_490_reads_our_upper_flavor_equal(tmp_path):
    """nccopy 4.9.0 reads our store into a netCDF-4 file; that file must hold the source model."""
    nccopy = require_tool("nccopy")
    model, url = _write_upper(tmp_path, chars=False)  # nccopy 4.9.0 fails on every NCZarr char variable
    nc = tmp_path / "copy.nc"
    out = subprocess.run([nccopy, "-k", "nc4", url, str(nc)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert diff(model, read_source(str(nc)), ignore={
        **CONTIGUOUS, **UPPER_FLAVOR,
        "no_fill": "nccopy writes its output in NOFILL mode (nc_set_fill NC_NOFILL)"}) == []


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="netcdf-c 4.10.1 ignores the upper-case _NCZARR_ATTR "
                   "and sub-group _NCZARR_GROUP keys: the short attribute reads as int, /g's dimension y is lost")
def test_known_deviation_410_reads_upper_flavor(tmp_path):
    _model, url = _write_upper(tmp_path, chars=False)  # 4.10.1 cannot open 4.9.0's <U1 char (below)
    seen = netcdf4.read(url)
    still_wrong((seen.root.attributes["shorts"].type, list(seen.root.groups["g"].dimensions)),
                wrong=("int", []), right=("short", ["y"]))


def test_we_read_what_ncgen_490_writes(tmp_path):
    ncgen = require_tool("ncgen")
    cdl = tmp_path / "t.cdl"
    cdl.write_text("""netcdf t {
dimensions:
  x = 3 ;
variables:
  byte b(x) ;
    b:_FillValue = -5b ;
  char c(x) ;
  float f(x) ;
    f:_DeflateLevel = 2 ;
    f:_Shuffle = "true" ;
  :title = "hello" ;
  :c42 = "42" ;
  :js = "[1, 2]" ;
  :u = 18446744073709551615ULL ;
  :sh = 1s, 2s ;
data:
  b = 1, _, 3 ;
  c = "ab" ;
  f = 1, 2, 3 ;
group: g1 {
 dimensions: z = 2 ;
 variables: ushort w(z, x) ;
 data: w = 1,2,3,4,5,6 ;
}
}
""")
    url = to_file_url(str(tmp_path / "gen.file"), "file")
    subprocess.run([ncgen, "-4", "-b", "-o", url, str(cdl)], check=True, capture_output=True, timeout=60)
    ref = tmp_path / "ref.nc"
    subprocess.run([ncgen, "-4", "-b", "-o", str(ref), str(cdl)], check=True, capture_output=True, timeout=60)
    expected = read_source(str(ref))
    ours = open_dataset(str(tmp_path / "gen.file"))
    assert ours.root.variables["f"].filters == []  # Debian's netcdf-c 4.9.0 has no NCZarr codecs
    assert diff(expected, ours, ignore={**CONTIGUOUS, "filters": "ncgen 4.9.0 deflates f in the .nc but cannot "
                                                                 "in the NCZarr store (asserted just above)"}) == []


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="netcdf-c 4.9.0 writes a big-endian variable's dtype "
                   "as >f4 but its bytes little-endian; readers that honour the dtype see garbage")
def test_known_deviation_490_big_endian_bytes(tmp_path):
    import json

    ncgen = require_tool("ncgen")
    cdl = tmp_path / "be.cdl"
    cdl.write_text('netcdf be { dimensions: x = 3 ; variables: float f(x) ; f:_Endianness = "big" ; '
                   "data: f = 1, 2, 3 ; }")
    url = to_file_url(str(tmp_path / "be.file"), "file")
    built = subprocess.run([ncgen, "-4", "-b", "-o", url, str(cdl)], capture_output=True, text=True, timeout=60)
    assert built.returncode == 0, built.stderr  # ncgen failing is not the known bug
    assert json.loads((tmp_path / "be.file" / "f" / ".zarray").read_text())["dtype"] == ">f4"
    raw = (tmp_path / "be.file" / "f" / "0").read_bytes()
    still_wrong(raw, wrong=np.array([1, 2, 3], "<f4").tobytes(), right=np.array([1, 2, 3], ">f4").tobytes())


@pytest.mark.parametrize("cdl", [
    "netcdf s { variables: double sc ; data: sc = 2.5 ; }",
])
def test_known_deviation_490_cannot_read_scalars(cdl, tmp_path):
    """netcdf-c 4.9.0 writes NCZarr scalars but crashes reading them back; our reader reads them."""
    ncgen, ncdump = require_tool("ncgen"), require_tool("ncdump")
    (tmp_path / "s.cdl").write_text(cdl)
    url = to_file_url(str(tmp_path / "s.file"), "file")
    subprocess.run([ncgen, "-4", "-b", "-o", url, str(tmp_path / "s.cdl")], check=True, capture_output=True, timeout=60)
    assert subprocess.run([ncdump, url], capture_output=True, timeout=60).returncode == -11  # SIGSEGV
    assert float(open_dataset(str(tmp_path / "s.file")).root.variables["sc"].data) == 2.5


def test_known_deviation_490_cannot_write_unlimited(tmp_path):
    ncgen = require_tool("ncgen")
    (tmp_path / "u.cdl").write_text("netcdf u { dimensions: t = UNLIMITED ; variables: int v(t) ; data: v = 1, 2 ; }")
    url = to_file_url(str(tmp_path / "u.file"), "file")
    out = subprocess.run([ncgen, "-4", "-b", "-o", url, str(tmp_path / "u.cdl")], capture_output=True, text=True,
                         timeout=60)
    assert (out.returncode, out.stderr.splitlines()[0]) == (1, "ncgen: NetCDF: Invalid dimension size")


def _ncgen_chars(tmp_path) -> str:
    ncgen = require_tool("ncgen")
    (tmp_path / "c.cdl").write_text('netcdf c { dimensions: x = 2 ; n = 3 ; variables: char c(x, n) ; '
                                    'data: c = "abc", "de" ; }')
    url = to_file_url(str(tmp_path / "c.file"), "file")
    subprocess.run([ncgen, "-4", "-b", "-o", url, str(tmp_path / "c.cdl")], check=True, capture_output=True, timeout=60)
    return url


def test_we_read_490_char_variables(tmp_path):
    _ncgen_chars(tmp_path)
    data = open_dataset(str(tmp_path / "c.file")).root.variables["c"].data
    assert data.tolist() == [[b"a", b"b", b"c"], [b"d", b"e", b""]]


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="netcdf-c 4.10.1 cannot open a dataset netcdf-c 4.9.0 "
                   "wrote with a char variable (dtype <U1): 'NetCDF: NCZarr error'")
def test_known_deviation_410_cannot_read_490_char(tmp_path):
    url = _ncgen_chars(tmp_path)  # outside the expected failure: ncgen raising CalledProcessError fails the test
    try:
        data, error = netcdf4.read(url).root.variables["c"].data.tolist(), None
    except FormatError as exc:
        data, error = None, str(exc).partition("#mode=nczarr,file: ")[2]
    still_wrong((data, error), wrong=(None, "not a netCDF file netCDF4-python can open (NetCDF: NCZarr error)"),
                right=([[b"a", b"b", b"c"], [b"d", b"e", b""]], None))


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="nccopy 4.9.0 exits 1 ('NetCDF: Invalid argument') "
                   "copying an NCZarr char variable, even one ncgen 4.9.0 wrote")
def test_known_deviation_490_nccopy_char(tmp_path):
    nccopy = require_tool("nccopy")
    url = _ncgen_chars(tmp_path)  # outside the expected failure: ncgen raising CalledProcessError fails the test
    out = subprocess.run([nccopy, "-k", "nc4", url, str(tmp_path / "c.nc")], capture_output=True, text=True,
                         timeout=60)
    still_wrong((out.returncode, out.stderr.splitlines()[:1]), wrong=(1, ["NetCDF: Invalid argument"]),
                right=(0, []))


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="Debian's netcdf-c 4.9.0 has no NCZarr codecs: it "
                   "returns zlib-compressed chunk bytes as data, with exit 0")
def test_known_deviation_490_reads_compressed_bytes_as_data(tmp_path):
    import json
    import zlib

    ncdump = require_tool("ncdump")
    root = Group({"x": Dimension(4)})
    root.variables["v"] = Variable("int", ["/x"], (4,), {}, np.arange(4, dtype="i4"))
    with DirectoryStore(tmp_path / "z.file", "w") as store:
        write_dataset(Dataset(root), store, flavor="nczarr-2-upper")
    zarray = json.loads((tmp_path / "z.file" / "v" / ".zarray").read_text())
    zarray["compressor"] = {"id": "zlib", "level": 1}
    (tmp_path / "z.file" / "v" / ".zarray").write_text(json.dumps(zarray))
    chunk = tmp_path / "z.file" / "v" / "0"
    frame = zlib.compress(chunk.read_bytes(), 1)
    assert len(frame) >= 16  # the wrong values are its first 16 bytes: no read past the buffer, no heap garbage
    chunk.write_bytes(frame)
    out = subprocess.run([ncdump, to_file_url(str(tmp_path / "z.file"), "file")], capture_output=True, text=True,
                         timeout=60)
    cdl = "netcdf z {{\ndimensions:\n\tx = 4 ;\nvariables:\n\tint v(x) ;\ndata:\n\n v = {} ;\n}}\n".format
    as_data = ", ".join(str(int(x)) for x in np.frombuffer(frame[:16], "<i4"))  # the compressed bytes as 4 ints
    still_wrong((out.returncode, out.stderr, out.stdout), wrong=(0, "", cdl(as_data)), right=(0, "", cdl("0, 1, 2, 3")))
