"""nczarr-dump follows ncdump 4.9.0, flag by flag.

Each comparison converts a netCDF file with nc2nczarr and checks that our dump of
the STORE is the text ncdump 4.9.0 prints for the SOURCE file with the same flags
(every line but the dataset name). Where the store must differ (``-s`` storage
facts), the expected values come from netcdf-c 4.10.1 through netCDF4-python.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.cdl.writer import CdlOptions, CdlWriter
from nczarr_conformance.cli import dump
from nczarr_conformance.sources.dump_source import StoreSource, open_source
from nczarr_conformance.stores.directory import DirectoryStore
from tests.cli.test_cli import assert_clean_failure, run
from tests.conftest import REPO, require_module, require_tool

pytestmark = pytest.mark.peer


def write_edge_nc(path: str) -> None:
    """Everything ncdump prints in a special way: escaped names, NULs and non-UTF-8 bytes in char
    data, control characters, a keyword-named variable, two unlimited dimensions in one variable,
    CF times with a calendar and bounds, a C_format, float specials, byte data without a fill, a
    group dimension hiding a root one, an empty record variable and a long wrapped row."""
    import netCDF4

    nc = netCDF4.Dataset(path, "w", format="NETCDF4")
    try:
        for name, size in (("time", None), ("rec", None), ("x", 4), ("nv", 2), ("len", 9), ("wide", 40),
                           ("empty", None)):
            nc.createDimension(name, size)
        nc.setncattr("ctl", "tab\there\nnewline \"q\" back\\slash 'apos' \x01\x7f end")
        t = nc.createVariable("time", "f8", ("time",), fill_value=-1.0)
        t.units = "hours since 2000-01-01 00:00:00"
        t.calendar = "noleap"
        t.bounds = "time_bnds"
        t.valid_range = np.array([0.0, 1e6])
        t.actual_range = np.array([0.0, 12.5, 36.0, 48.0, 100.0, 1000.0, 10000.0])
        t[:] = [0.0, 1.5, 12.25, 24.0, 1459.9999999, -1.0]
        nc.createVariable("time_bnds", "f8", ("time", "nv"))[:] = np.arange(12, dtype="f8").reshape(6, 2) * 6
        nc.createVariable("multi", "i4", ("time", "rec", "x"))[0:2, 0:3, :] = np.arange(24).reshape(2, 3, 4)
        rows = [b"abc\0def", b"tail\0\0", b"\xff\xfe\xe9ok", b"q\"'\\\n\t\r\x0b\x08\x0c"]
        c = nc.createVariable("chars", "S1", ("x", "len"))
        c[:] = np.array([r.ljust(9, b"\0")[:9] for r in rows], dtype="S9").view("S1").reshape(4, 9)
        s = nc.createVariable("strs", str, ("x",))
        for i, text in enumerate(["plain", "ctl\x01\x0b\x7f", 'q"\'\\n', "ünï 日本"]):
            s[i] = text
        vals = np.linspace(-1e5, 1e5, 40).astype("f4")
        vals[3:8] = [np.nan, np.inf, -np.inf, 9.96921e36, 1.0e-30]
        nc.createVariable("floats", "f4", ("wide",))[:] = vals
        d = nc.createVariable("dfmt", "f8", ("x",), fill_value=1e20)
        d.C_format = "%.3f"
        d[:] = [1.23456, 1e20, -0.5, 3.0]
        nc.createVariable("bytes", "i1", ("x",))[:] = [-127, -128, 0, 127]
        for name in ("1var", "var with space", "a:b=c", "data", "ünï", "x(y)"):
            w = nc.createVariable(name, "i2", ("x",))
            w[:] = np.arange(4)
            w.setncattr("att name", np.int16(1))
        nc.createVariable("nothing", "i4", ("empty",))
        g = nc.createGroup("g")
        g.createDimension("x", 2)
        g.createVariable("shadow", "i4", ("x",))[:] = [1, 2]
        g.createVariable("outer", "i4", ("time",))[:] = np.arange(6)
        g.createVariable("x", "u8", ("x",))[:] = [7, 2**64 - 1]
        g.createGroup("sub dir").createVariable("time", "i4", ()).assignValue(3)
    finally:
        nc.close()


@pytest.fixture(scope="session")
def sources(rich_nc, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """name → (netCDF source, the nc2nczarr store made from it)."""
    base = tmp_path_factory.mktemp("dumpflags")
    edge = base / "edge.nc"
    write_edge_nc(str(edge))
    out = {}
    for name, nc in (("rich", rich_nc), ("edge", edge)):
        store = base / f"{name}.file"
        converted = run("nc2nczarr", str(nc), str(store))
        assert converted.returncode == 0, converted.stderr
        out[name] = (nc, store)
    return out


def ncdump(*args: str) -> bytes:
    done = subprocess.run([require_tool("ncdump"), *args], capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def ours(capsysbinary, *args: str) -> bytes:
    assert dump.main(list(args)) == 0
    captured = capsysbinary.readouterr()
    assert captured.err == b""
    return captured.out


def body(text: bytes) -> list[bytes]:
    """Every line but the first (``netcdf NAME {``)."""
    return text.split(b"\n")[1:]


FLAGS = {
    "rich": [[], ["-h"], ["-c"], ["-v", "time,g1/w"], ["-v", "/g1/g2/deep", "-g", "g2"], ["-g", "g1"], ["-t"],
             ["-p", "4,9"], ["-p", "9,17"], ["-p", ",17"], ["-v", "be_float,strings", "-l", "50"],
             ["-w", "-L", "1", "-Xp", "-c"], ["-L0", "-w", "-h"], ["-b", "f"], ["-f", "c", "-t"],
             ["-b", "c", "-f", "f", "-v", "chars,strings,partial,g1/w,/g1/g2/deep"]],
    "edge": [[], ["-h"], ["-c"], ["-t"], ["-i"], ["-t", "-v", "time_bnds,g/x,/g/shadow,sub dir/time"],
             ["-g", "/g/sub dir"], ["-p", "3,5"], ["-p", "12"], ["-l", "40"],
             ["-b", "c"], ["-b", "f", "-l", "30"], ["-f", "c"], ["-f", "f", "-b", "c"],
             ["-f", "f", "-v", "multi,chars,floats,dfmt,g/x"]],
}


@pytest.mark.parametrize("name,flags", [(n, f) for n, fl in FLAGS.items() for f in fl],
                         ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_store_dump_equals_ncdump_of_source(sources, capsysbinary, name, flags):
    nc, store = sources[name]
    expected = ncdump(*flags, str(nc))
    got = ours(capsysbinary, *flags, str(store))
    assert body(got) == body(expected)


@pytest.mark.parametrize("flags", [["-s"], ["-s", "-h"], ["-k"], ["-t", "-c"]], ids=" ".join)
@pytest.mark.parametrize("name", ["rich", "edge"])
def test_netcdf_file_dump_equals_ncdump_exactly(sources, capsysbinary, name, flags):
    """Read straight from the netCDF file, even the -s storage facts and -k are ncdump's."""
    nc, _ = sources[name]
    assert ours(capsysbinary, *flags, str(nc)) == ncdump(*flags, str(nc))


def _special_lines(text: bytes, var: str) -> list[str]:
    prefix = f"\t\t{var}:_"
    return [ln for ln in text.decode("utf-8").splitlines() if ln.lstrip(" ").startswith(prefix)]


def test_specials_of_a_store(sources, capsysbinary):
    """-s on a store: chunking, shuffle, deflate and endianness as ncdump -s says for the (chunked)
    source; _Codecs and the global facts as netcdf-c 4.10.1 reports them for the store."""
    import netCDF4

    nc, store = sources["rich"]
    got = ours(capsysbinary, "-s", str(store))
    theirs = ncdump("-s", str(nc))
    for var in ("time", "partial", "be_float"):  # chunked in the source, so the facts carry over
        assert [ln for ln in _special_lines(got, var) if ":_Codecs" not in ln] == _special_lines(theirs, var)
    peer = netCDF4.Dataset(f"file://{store}#mode=nczarr,file")
    try:
        codecs = peer["be_float"].getncattr("_Codecs")
        facts = {a: int(peer.getncattr(a)) for a in ("_SuperblockVersion", "_IsNetcdf4")}
    finally:
        peer.close()
    escaped = codecs.replace('"', '\\"')
    assert f'\t\tbe_float:_Codecs = "{escaped}" ;' in got.decode("utf-8").splitlines()
    assert [ln for ln in _special_lines(got, "partial") if "_Codecs" in ln] == []  # no codecs, no _Codecs
    for attr, value in facts.items():
        assert f"\t\t:{attr} = {value} ;" in got.decode("utf-8").splitlines()
    assert '\t\t:_Format = "netCDF-4" ;' in got.decode("utf-8").splitlines()


def test_specials_of_a_netcdf_c_store(tmp_path, capsysbinary):
    """A store netcdf-c 4.10.1 wrote: its _NCProperties, superblock version, codecs and -k kind."""
    import netCDF4

    url = f"file://{tmp_path}/nz.file#mode=nczarr,file"
    with netCDF4.Dataset(url, "w") as nc:
        nc.createDimension("x", 10)
        v = nc.createVariable("v", "f4", ("x",), zlib=True, complevel=4, shuffle=True, chunksizes=(5,))
        v[:] = np.arange(10)
    with netCDF4.Dataset(url) as nc:
        expected = {a: nc.getncattr(a) for a in ("_NCProperties", "_SuperblockVersion", "_IsNetcdf4")}
        codecs = nc["v"].getncattr("_Codecs")
        chunks = nc["v"].chunking()
    lines = ours(capsysbinary, "-s", url).decode("utf-8").splitlines()
    assert f'\t\t:_NCProperties = "{expected["_NCProperties"]}" ;' in lines
    assert f'\t\t:_SuperblockVersion = {int(expected["_SuperblockVersion"])} ;' in lines
    assert f'\t\t:_IsNetcdf4 = {int(expected["_IsNetcdf4"])} ;' in lines
    assert f'\t\tv:_Codecs = "{codecs.replace(chr(34), chr(92) + chr(34))}" ;' in lines
    assert f"\t\tv:_ChunkSizes = {', '.join(map(str, chunks))} ;" in lines
    assert [ln for ln in lines if ":_Shuffle" in ln or ":_DeflateLevel" in ln] == \
        ['\t\tv:_Shuffle = "true" ;', "\t\tv:_DeflateLevel = 4 ;"]
    # netcdf-c 4.10 writes the 4.10 layout (flavors.py): -K names the mode and that flavor
    assert ours(capsysbinary, "-K", url) == b"nczarr nczarr-4.10\n"


def test_pure_zarr_kind(tmp_path, capsysbinary):
    zarr = require_module("zarr")
    root = zarr.open_group(str(tmp_path / "z.zarr"), mode="w", zarr_format=2)
    root.create_array("a", shape=(3,), dtype="i4")[:] = [1, 2, 3]
    url = f"file://{tmp_path}/z.zarr#mode=zarr,file"
    assert ours(capsysbinary, "-K", url) == b"zarr zarr\n"
    assert ours(capsysbinary, "-k", url) == ncdump("-k", url) == b"netCDF-4\n"  # ncdump's one word


@pytest.mark.parametrize("args,words", [(["-v", "nope"], ["nope", "no such variable"]),
                                        (["-v", "g1/nope"], ["g1/nope", "no such variable"]),
                                        (["-g", "nope"], ["nope", "no such group"]),
                                        (["-p", "0"], ["-p 0"]), (["-p", "x,7"], ["-p x,7"]),
                                        (["-p", "7,"], ["-p 7,"]), (["-p", ",x"], ["-p ,x"])])
def test_bad_selection_is_one_line_exit_2(sources, args, words):
    _, store = sources["rich"]
    result = run("nczarr-dump", *args, str(store))
    assert_clean_failure(result)
    assert result.stdout == ""
    for word in words:
        assert word in result.stderr
    if args[0] != "-p":  # a bad -p is named by the option alone
        assert str(store) in result.stderr


def test_h_is_header_and_help_is_long(sources):
    _, store = sources["rich"]
    helped = run("nczarr-dump", "--help")
    assert helped.returncode == 0 and "-h, --header, -H" in helped.stdout
    for flag in ("-h", "-H", "--header"):
        header = run("nczarr-dump", flag, str(store))
        assert header.returncode == 0 and "data:" not in header.stdout and "variables:" in header.stdout


# ---- reading only what is printed -----------------------------------------------------------

@pytest.fixture(scope="module")
def two_vars(tmp_path_factory) -> tuple[Path, Path, int]:
    """A store with two chunked variables; the number of chunks of one (from the source chunking)."""
    import netCDF4

    base = tmp_path_factory.mktemp("twovars")
    nc_path = base / "two.nc"
    with netCDF4.Dataset(nc_path, "w") as nc:
        nc.createDimension("t", 40)
        nc.createDimension("x", 50)
        for name in ("a", "b"):
            v = nc.createVariable(name, "i4", ("t", "x"), chunksizes=(4, 25))
            v[:] = np.arange(2000, dtype="i4").reshape(40, 50)
    with netCDF4.Dataset(nc_path) as nc:
        n_chunks = math.prod(math.ceil(s / c) for s, c in zip(nc["a"].shape, nc["a"].chunking(), strict=True))
    store = base / "two.file"
    assert run("nc2nczarr", str(nc_path), str(store)).returncode == 0
    return nc_path, store, n_chunks


def _chunk_gets(monkeypatch, capsysbinary, *args: str) -> list[str]:
    got: list[str] = []
    real = DirectoryStore._get

    def counting(self, key, limit=None):  # type: ignore[no-untyped-def]
        got.append(key)
        return real(self, key, limit)

    monkeypatch.setattr(DirectoryStore, "_get", counting)
    ours(capsysbinary, *args)
    return [k for k in got if not k.rsplit("/", 1)[-1].startswith(".")]


def test_v_reads_only_that_variables_chunks(two_vars, monkeypatch, capsysbinary):
    nc_path, store, n_chunks = two_vars
    keys = _chunk_gets(monkeypatch, capsysbinary, "-v", "a", str(store))
    assert len(keys) == n_chunks and all(k.startswith("/a/") for k in keys)
    assert _chunk_gets(monkeypatch, capsysbinary, "-h", str(store)) == []
    assert _chunk_gets(monkeypatch, capsysbinary, "-c", str(store)) == []  # no coordinate variables
    assert body(ours(capsysbinary, "-v", "a", str(store))) == body(ncdump("-v", "a", str(nc_path)))


def test_data_streams_one_run_of_chunks_at_a_time(two_vars, monkeypatch):
    """The largest array held is one run of chunks along the first dimension, never the variable."""
    _, store, _ = two_vars
    sizes: list[int] = []
    real = StoreSource.slabs

    def recording(self, path, var):  # type: ignore[no-untyped-def]
        for slab in real(self, path, var):
            sizes.append(slab.nbytes)
            yield slab

    monkeypatch.setattr(StoreSource, "slabs", recording)
    with open_source(str(store)) as source:
        CdlWriter(source.dataset, lambda s: None, CdlOptions(variables=("a",)), source.slabs, source.facts).dump("x")
    assert sizes == [4 * 50 * 4] * 10  # chunk rows of 4 × the whole x extent × int32


_DUMP_PEAK = """
import sys, tracemalloc
# what the dump imports when it first needs it (codecs, the data section, its thread) is code, not data
import concurrent.futures, numcodecs, nczarr_conformance.cdl.annotate, nczarr_conformance.cdl.vardata
from nczarr_conformance.cdl.writer import CdlOptions, CdlWriter
from nczarr_conformance.sources.dump_source import open_source
with open_source(sys.argv[1]) as source:
    writer = CdlWriter(source.dataset, lambda s: None, CdlOptions(), source.slabs, source.facts)
    tracemalloc.start()
    writer.dump("big")
    print(tracemalloc.get_traced_memory()[1])
"""


def test_memory_stays_below_one_variable(tmp_path):
    """Dumping streams: a 4 MB and a 16 MB variable in 20 KB runs of chunks peak alike, far below their size.

    What grows with the variable is its metadata only (the chunk keys listed: ~0.15 MB here), never its
    values: one run of chunks and two batches of texts (one written while the next is formatted on the
    second thread, cdl/vardata.py) are held, ~1.4 MB measured, where holding the variable would add 12 MB."""
    import netCDF4

    peaks = []
    for rows in (400, 1600):
        nc_path = tmp_path / f"big{rows}.nc"
        with netCDF4.Dataset(nc_path, "w") as nc:
            nc.createDimension("t", rows)
            nc.createDimension("x", 2500)
            nc.createVariable("v", "i4", ("t", "x"), chunksizes=(2, 2500))[:] = 7
        store = tmp_path / f"big{rows}.file"
        assert run("nc2nczarr", str(nc_path), str(store)).returncode == 0
        # in a fresh interpreter: what earlier tests left in this one (caches, pools, their threads' frees)
        # is not the dump's to carry
        measured = subprocess.run([sys.executable, "-c", _DUMP_PEAK, str(store)], capture_output=True, text=True,
                                  timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert measured.returncode == 0, measured.stderr
        peaks.append(int(measured.stdout.split()[-1]))
    small, large = peaks
    assert large < 1600 * 2500 * 4 / 8 and small < 400 * 2500 * 4 / 2, peaks
    assert large - small < 0.5e6, peaks  # 12 MB more values, less than 0.5 MB more memory


# ---- CDL that ncgen reads back ------------------------------------------------------------

def write_names_nc(path: str) -> None:
    """Names that need escaping, non-UTF-8 bytes and escapes in char data, control characters in
    strings (no NUL or newline inside char rows: ncgen 4.9.0 crashes on ncdump's own text for them)."""
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 3)
        nc.createDimension("len", 7)
        nc.createDimension("2d", 2)
        nc.setncattr("ctl", "tab\there\nnewline \"q\" back\\slash 'apos' \x01\x7f end")
        for name in ("1var", "var with space", "a:b=c", "data", "ünï", "x(y)", "semi;colon", "q'uote"):
            w = nc.createVariable(name, "i2", ("x", "2d"))
            w[:] = np.arange(6).reshape(3, 2)
            w.setncattr("att name", np.int16(1))
        rows = [b"ab\xff\xfe\xe9", b"q\"'\\\t\r", b"tail"]
        nc.createVariable("chars", "S1", ("x", "len"))[:] = \
            np.array([r.ljust(7, b"\0") for r in rows], dtype="S7").view("S1").reshape(3, 7)
        s = nc.createVariable("strs", str, ("x",))
        for i, text in enumerate(["ctl\x01\x7f", 'q"\'\\n', "ünï 日本"]):
            s[i] = text
        nc.createGroup("g roup").createVariable("in", "i4", ("x",))[:] = [1, 2, 3]


def test_escaped_names_and_bytes_survive_ncgen(tmp_path):
    """Our CDL of a store → ncgen -4 → the same names, char bytes and strings as the source."""
    import netCDF4

    nc = tmp_path / "names.nc"
    write_names_nc(str(nc))
    store = tmp_path / "names.file"
    assert run("nc2nczarr", str(nc), str(store)).returncode == 0
    cdl = tmp_path / "names.cdl"
    cdl.write_bytes(subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", str(store)],
                                   capture_output=True, check=True, timeout=120).stdout)
    rebuilt = tmp_path / "rebuilt.nc"
    done = subprocess.run([require_tool("ncgen"), "-4", "-o", str(rebuilt), str(cdl)], capture_output=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr

    def names(group):  # type: ignore[no-untyped-def]
        return {"vars": {n: sorted(v.ncattrs()) for n, v in group.variables.items()},
                "dims": sorted(group.dimensions), "attrs": sorted(group.ncattrs()),
                "groups": {n: names(g) for n, g in group.groups.items()}}

    with netCDF4.Dataset(nc) as a, netCDF4.Dataset(rebuilt) as b:
        assert json.dumps(names(b), sort_keys=True) == json.dumps(names(a), sort_keys=True)
        for ds in (a, b):
            ds["chars"].set_auto_chartostring(False)
        assert np.array_equal(np.ma.getdata(a["chars"][:]), np.ma.getdata(b["chars"][:]))
        assert list(a["strs"][:]) == list(b["strs"][:])
        assert a.getncattr("ctl") == b.getncattr("ctl")


def test_to_cdl_default_digits_let_ncgen_rebuild_the_same_values(tmp_path):
    """cdl.to_cdl without options prints 9/17 significant digits, so ncgen 4.9.0 rebuilds exactly the same
    float and double values (attributes and data) that the model holds; ncdump's 7/15 would round them."""
    netCDF4 = require_module("netCDF4")
    from nczarr_conformance.cdl.writer import to_cdl
    from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable

    doubles = np.array([0.1, 1 / 3, 2 / 3, 1e-300, 123456789.123456789, -9.87654321e200], dtype="f8")
    floats = np.array([0.1, 1 / 3, 2 / 3, 3.4e38], dtype="f4")
    root = Group({"n": Dimension(6), "m": Dimension(4)})
    root.variables["d"] = Variable("double", ["/n"], (6,), {"a": Attribute("double", doubles[:2])}, doubles)
    root.variables["f"] = Variable("float", ["/m"], (4,), {"a": Attribute("float", floats[:2])}, floats)
    cdl = tmp_path / "t.cdl"
    cdl.write_text(to_cdl(Dataset(root), "t"))
    done = subprocess.run([require_tool("ncgen"), "-4", "-o", str(tmp_path / "t.nc"), str(cdl)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    with netCDF4.Dataset(tmp_path / "t.nc") as nc:
        for name, values in (("d", doubles), ("f", floats)):
            assert np.asarray(nc[name][:]).tobytes() == values.tobytes(), name
            assert np.asarray(nc[name].getncattr("a")).tobytes() == values[:2].tobytes(), name


def test_t_takes_only_the_bounds_attribute_as_naming_a_time_variable(tmp_path, capsysbinary):
    """-t prints a variable as times when it is a time variable or the one its ``bounds`` attribute names (ncdump's
    rule); another text attribute of a time variable that names a variable (``ancillary_variables``, ``axis``) makes
    no time variable of it: ncdump -t prints ``flag`` and ``T`` as plain numbers."""
    import netCDF4

    nc = tmp_path / "anc.nc"
    with netCDF4.Dataset(str(nc), "w", format="NETCDF4") as ds:
        ds.createDimension("time", 2)
        t = ds.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t.ancillary_variables = "flag"
        t.axis = "T"
        t[:] = [0.0, 1.0]
        ds.createVariable("flag", "i4", ("time",))[:] = [3, 4]
        ds.createVariable("T", "f8", ("time",))[:] = [5.0, 6.0]
    store = tmp_path / "anc.file"
    assert run("nc2nczarr", str(nc), str(store)).returncode == 0
    expected = ncdump("-t", str(nc))
    assert b" flag = 3, 4 ;" in expected and b" T = 5, 6 ;" in expected  # numbers, not dates
    assert body(ours(capsysbinary, "-t", str(store))) == body(expected)
    assert ours(capsysbinary, "-t", str(nc)) == expected


def write_filters_nc(path: Path) -> None:
    """Every filter ncdump -F spells: fletcher32 with shuffle and deflate, deflate alone, shuffle of 8 bytes."""
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("x", 6)
        for name, dtype, opts in (("all", "i4", {"zlib": True, "shuffle": True, "fletcher32": True, "complevel": 3}),
                                  ("deflate", "i2", {"zlib": True, "shuffle": False, "complevel": 1}),
                                  ("wide", "f8", {"zlib": True, "shuffle": True, "complevel": 4}),
                                  ("plain", "u1", {})):
            nc.createVariable(name, dtype, ("x",), **opts)[:] = np.arange(6)


@pytest.fixture(scope="module")
def filters_nc(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("filters")
    nc, store = base / "filters.nc", base / "filters.file"
    write_filters_nc(nc)
    converted = run("nc2nczarr", str(nc), str(store))
    assert converted.returncode == 0, converted.stderr
    return nc, store


@pytest.mark.parametrize("flags", [["-s", "-F"], ["-s", "-h", "-F"], ["-F"], ["-s", "-F", "-w", "-L", "2", "-Xp"]],
                         ids=" ".join)
def test_filter_attribute_of_a_netcdf_file_is_ncdumps(filters_nc, sources, capsysbinary, flags):
    nc, _ = filters_nc
    assert ours(capsysbinary, *flags, str(nc)) == ncdump(*flags, str(nc))
    rich, _ = sources["rich"]
    assert ours(capsysbinary, *flags, str(rich)) == ncdump(*flags, str(rich))


def test_filter_attribute_of_a_store_is_ncdumps_of_its_source(filters_nc, capsysbinary):
    """-F on the store: each variable's _Filter (and no _Shuffle, _DeflateLevel, _Fletcher32) as ncdump -F
    prints it for the source file; _Codecs stays (NCZarr's own)."""
    nc, store = filters_nc
    theirs = ncdump("-s", "-h", "-F", str(nc))
    got = ours(capsysbinary, "-s", "-h", "-F", str(store))
    for var in ("all", "deflate", "wide", "plain"):
        expected = [ln for ln in _special_lines(theirs, var) if ":_Filter" in ln]
        assert [ln for ln in _special_lines(got, var) if ":_Filter" in ln] == expected
        assert not [ln for ln in _special_lines(got, var) if ":_Shuffle" in ln or ":_Deflate" in ln
                    or ":_Fletcher32" in ln]
    assert b'all:_Filter = "3|2,4|1,3"' in theirs  # the three filters are really there to compare


def test_kind_of_a_store_is_ncdumps_one_word(filters_nc, capsysbinary):
    """ncdump 4.9.0 -k on an NCZarr store prints netCDF-4 (netcdf-c's nc_inq_format), one word as for a file."""
    nc, store = filters_nc
    url = f"file://{store}#mode=nczarr,file"
    assert ours(capsysbinary, "-k", str(store)) == ours(capsysbinary, "-k", url) == ncdump("-k", url)
    assert ours(capsysbinary, "-k", str(nc)) == ncdump("-k", str(nc)) == b"netCDF-4\n"
    assert ours(capsysbinary, "-K", str(store)) == b"nczarr nczarr-4.10\n"
