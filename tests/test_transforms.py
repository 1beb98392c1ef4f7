"""nc2nczarr's nccopy transforms: the storage and values nccopy 4.9.0 produces for the same options.

Every expectation comes from a peer: nccopy's output (or the source file, or a variable
netCDF4-python compresses itself) read with netCDF4-python, against our store read with
netCDF4-python through netcdf-c's NCZarr (``file://…#mode=nczarr,file``). nccopy's
"contiguous" is one whole-array chunk in NCZarr, which has no contiguous layout.
"""
from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
from numcodecs.zstd import MAX_CLEVEL as ZSTD_MAX_LEVEL

from nczarr_conformance.cli.convert import main
from nczarr_conformance.conversion.from_netcdf import convert, total_bytes
from nczarr_conformance.conversion.transforms import parse

from .conftest import CORPUS, require_tool

RICH = CORPUS / "rich.nc"
#: rich.nc without its string variables: nccopy 4.9.0 refuses -d on a string variable
RICH_NO_STRINGS = "time,v_i1,v_u1,v_i2,v_u2,v_i4,v_u4,v_i8,v_u8,v_f4,v_f8,chars,partial,be_float,scalar_d,w,deep"


@pytest.fixture(scope="module")
def grid_nc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Chunks big enough for nccopy's 8 KiB rule, partial edge chunks, a group, a compressed record variable,
    a chunked fixed-size one."""
    path = tmp_path_factory.mktemp("grid") / "grid.nc"
    with netCDF4.Dataset(path, "w") as d:
        d.createDimension("t", None)
        d.createDimension("x", 100)
        v = d.createVariable("v", "f8", ("t", "x"), chunksizes=(16, 64))
        v[:] = np.arange(4000).reshape(40, 100) / 7
        d.createVariable("x", "f8", ("x",))[:] = np.arange(100)
        g = d.createGroup("g")
        g.createDimension("y", 30)
        g.createVariable("w", "i4", ("x", "y"))[:] = np.arange(3000).reshape(100, 30)
        u = g.createVariable("u", "i2", ("t", "y"), zlib=True, complevel=2, shuffle=True, chunksizes=(8, 30))
        u[:] = np.arange(1200).reshape(40, 30)
        g.createVariable("k", "f8", ("x", "y"), chunksizes=(40, 30))[:] = np.arange(3000).reshape(100, 30) / 3
    return path


def _walk(group: Any) -> Any:
    yield group
    for sub in group.groups.values():
        yield from _walk(sub)


def _url(store: Path) -> str:
    return f"file://{store.resolve()}#mode=nczarr,file"


def layout(path: str) -> dict[str, Any]:
    """Dimensions per group; (chunk shape, active filters) per variable, as netCDF4-python reports them."""
    out: dict[str, Any] = {}
    with netCDF4.Dataset(path) as d:
        for g in _walk(d):
            out[g.path] = {n: (len(dim), dim.isunlimited()) for n, dim in g.dimensions.items()}
            for name, var in g.variables.items():
                chunking = var.chunking()
                chunks = list(var.shape) if chunking == "contiguous" else list(chunking)
                out[f"{g.path.rstrip('/')}/{name}"] = (chunks, {k: f for k, f in var.filters().items() if f})
    return out


def values(path: str) -> dict[str, np.ndarray]:
    out = {}
    with netCDF4.Dataset(path) as d:
        for g in _walk(d):
            for name, var in g.variables.items():
                var.set_auto_maskandscale(False)
                out[f"{g.path.rstrip('/')}/{name}"] = np.asarray(var[...])
    return out


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal shapes and values, bit for bit (NaN payloads and -0.0 count), whatever the byte order."""
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "O" or b.dtype.kind == "O":
        return bool(a.tolist() == b.tolist())
    native = a.dtype.newbyteorder("=")
    return a.astype(native).tobytes() == b.astype(native).tobytes()


def run_nccopy(opts: list[str], src: Path, dst: Path) -> None:
    subprocess.run([require_tool("nccopy"), "-k", "nc4", *opts, str(src), str(dst)], check=True, capture_output=True,
                   timeout=120)


def run_ours(opts: list[str], src: Path, dst: Path) -> None:
    assert main(["-q", *opts, str(src), str(dst)]) == 0


PEER_CASES = [
    ("rich", "-u"),
    ("rich", "-c x/2"),
    ("rich", "-c time/2"),
    ("rich", "-M 1 -c partial:3,1 -c g1/w:1,3"),
    ("rich", "-M 1 -c x/1"),
    ("rich", "-V partial,deep"),
    ("rich", f"-V {RICH_NO_STRINGS} -d 5 -s"),
    ("rich", f"-V {RICH_NO_STRINGS} -d 1"),
    ("rich", f"-V {RICH_NO_STRINGS} -d 0"),
    ("grid", "-d 5 -s"),
    ("grid", "-d 3"),
    ("grid", "-d 0"),
    ("grid", "-c x/10"),
    ("grid", "-c x/10,t/4"),
    ("grid", "-c /g/y/7"),
    ("grid", "-c t/,x/"),
    ("grid", "-M 100 -c /g/w:10,5"),
    ("grid", "-u"),
    ("grid", "-V w"),
    ("grid", "-V x,g/u"),
    ("grid", "-G g"),
    ("grid", "-c /g/k:"),
    ("grid", "-c /g/k:contiguous -d 1"),
]


@pytest.mark.parametrize("which,opts", PEER_CASES, ids=[f"{w}:{o[:40]}" for w, o in PEER_CASES])
def test_storage_and_values_equal_nccopys(which: str, opts: str, grid_nc: Path, tmp_path: Path) -> None:
    src = RICH if which == "rich" else grid_nc
    run_nccopy(opts.split(), src, tmp_path / "peer.nc")
    run_ours(opts.split(), src, tmp_path / "ours.file")
    peer, ours = str(tmp_path / "peer.nc"), _url(tmp_path / "ours.file")
    assert layout(ours) == layout(peer)
    expected = values(peer)
    if "-G" in opts:  # nccopy 4.9.0 -G leaves the root group's data unwritten; the source has it
        source = values(str(src))
        expected.update({k: source[k] for k in expected if k.count("/") == 1})
    got = values(ours)
    assert got.keys() == expected.keys()
    for key in expected:
        assert same(got[key], expected[key]), key


def test_deflate_compresses_strings_too(tmp_path: Path) -> None:
    """nccopy cannot deflate a string variable; NCZarr can, and netcdf-c reads it back."""
    run_ours(["-d", "5", "-s"], RICH, tmp_path / "s.file")
    with netCDF4.Dataset(_url(tmp_path / "s.file")) as d, netCDF4.Dataset(RICH) as src:
        f = d["strings"].filters()
        assert f["zlib"] and f["complevel"] == 5 and not f["shuffle"]
        assert list(d["strings"][:]) == list(src["strings"][:])
        assert d["scalar_s"].filters()["zlib"] is False  # nccopy never filters a scalar


CODECS = [("zstd:3", {"compression": "zstd", "complevel": 3}),
          ("bz2:5", {"compression": "bzip2", "complevel": 5}),
          ("blosc:lz4:5", {"compression": "blosc_lz4", "complevel": 5, "blosc_shuffle": 1}),
          ("blosc:zstd:3:2", {"compression": "blosc_zstd", "complevel": 3, "blosc_shuffle": 2}),
          ("zlib:4", {"compression": "zlib", "complevel": 4}),
          ("none", {"compression": None})]


@pytest.mark.parametrize("spec,kwargs", CODECS, ids=[c[0] for c in CODECS])
def test_compressor_is_what_netcdf4_python_reports_for_its_own(spec: str, kwargs: dict[str, Any],
                                                              grid_nc: Path, tmp_path: Path) -> None:
    """The peer: netCDF4-python compressing a variable itself with the same codec (it shuffles only
    before zlib, so -s goes with zlib alone here)."""
    peer = tmp_path / "peer.nc"
    shuffle = kwargs["compression"] == "zlib"
    with netCDF4.Dataset(peer, "w") as d:
        d.createDimension("x", 100)
        d.createVariable("v", "f8", ("x",), shuffle=shuffle, **kwargs)[:] = np.arange(100)
        expected = d["v"].filters()
    run_ours(["-s"] * shuffle + ["--compressor", spec], grid_nc, tmp_path / "c.file")
    with netCDF4.Dataset(_url(tmp_path / "c.file")) as d:
        assert d["v"].filters() == expected
        assert d["g"]["u"].filters() == expected
    got, source = values(_url(tmp_path / "c.file")), values(str(grid_nc))
    assert all(same(got[k], source[k]) for k in source)


def test_a_transform_turns_direct_copy_off_only_for_the_variables_it_changes(grid_nc: Path, tmp_path: Path) -> None:
    """-d 2 -s leaves /g/u's HDF5 chunks (shuffle + deflate 2, 8x30) valid: copied; -d 9 -s does not:
    a level-2 stream must not be copied into a variable asked to hold level 9."""
    plain = convert(str(grid_nc), str(tmp_path / "p.file"))
    same = convert(str(grid_nc), str(tmp_path / "s.file"), transforms=parse(deflate="2", shuffle=True))
    other = convert(str(grid_nc), str(tmp_path / "o.file"), transforms=parse(deflate="9", shuffle=True))
    chunks_u, chunks_v, chunks_k = 5, 6, 3  # ceil(40 / 8) x 1; ceil(40 / 16) x ceil(100 / 64); ceil(100 / 40) x 1
    assert plain.copied == chunks_u + chunks_v + chunks_k  # uncompressed chunks are copied too
    assert same.copied == chunks_u  # v is compressed now: re-encoded; u is as it was
    assert other.copied == 0
    with open(tmp_path / "o.file" / "g" / "u" / "0.0", "rb") as fh:
        assert fh.read(2) == b"\x78\xda"  # zlib header of level 9, not the source's level 2 (0x785e)


@pytest.mark.parametrize("which,opts", [("rich", ""), ("rich", "-d 5 -s -c x/2"), ("rich", "-u -V partial,strings"),
                                        ("grid", ""), ("grid", "-c x/30,t/7"), ("grid", "-G g -d 1")])
def test_progress_total_is_the_sum_the_progress_callback_reports(which: str, opts: str, grid_nc: Path,
                                                                 tmp_path: Path) -> None:
    """The bar's total must be what its updates add up to: every planned chunk at full unencoded size,
    edge chunks padded (grid.nc's 40x100 in 16x64 chunks has partial edges), strings at their width."""
    src = str(RICH if which == "rich" else grid_nc)
    t = parse(**_kwargs(opts)) if opts else None
    reported = [0]

    def progress(chunks: int, raw_bytes: int, written: int) -> None:
        reported[0] += raw_bytes

    convert(src, str(tmp_path / "t.file"), progress=progress, transforms=t)
    assert total_bytes(src, transforms=t) == reported[0] > 0


def _kwargs(opts: str) -> dict[str, Any]:
    names = {"-d": "deflate", "-c": "chunkspecs", "-V": "variables", "-G": "groups", "-M": "min_chunk_bytes"}
    out: dict[str, Any] = {}
    words = opts.split()
    i = 0
    while i < len(words):
        w = words[i]
        if w == "-s":
            out["shuffle"] = True
        elif w == "-u":
            out["fix_unlimited"] = True
        else:
            i += 1
            if w == "-c":
                out.setdefault("chunkspecs", []).append(words[i])
            else:
                out[names[w]] = words[i]
        i += 1
    return out


def test_cli_bar_reaches_exactly_its_total(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "nczarr_conformance.cli.convert", "--progress", "-d", "3", "-c", "x/2"]
    r = subprocess.run([*cli, str(RICH), str(tmp_path / "b.file")], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    last = r.stderr.replace("\r", "\n").split("\n")
    bars = [line for line in last if "|" in line and "%" in line]
    assert bars and "100%" in bars[-1]


@pytest.mark.parametrize("args,named", [
    (["-d", "10"], "-d '10'"), (["-d", "x"], "-d 'x'"), (["-c", "x/0"], "-c 'x/0'"), (["-c", "x/a"], "-c 'x/a'"),
    (["-c", "x"], "-c 'x'"), (["-c", "v:2,b"], "-c 'v:2,b'"), (["-V", "a,,b"], "-V 'a,,b'"),
    (["--compressor", "szip"], "szip has no numcodecs codec"), (["--compressor", "lzma:3"], "'lzma'"),
    (["--compressor", "blosc:snappy:3"], "'snappy'"), (["--compressor", "zstd:99"], "zstd:99"),
    (["-d", "1", "--compressor", "zstd"], "-d and --compressor"), (["-M", "-1"], "-M '-1'"),
])
def test_bad_transform_syntax_is_one_usage_line_exit_2(args: list[str], named: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*args, str(RICH), str(tmp_path / "bad.file")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nc2nczarr: ") and named in err
    assert not (tmp_path / "bad.file").exists()


@pytest.mark.parametrize("args,named", [
    (["-V", "nope"], "-V nope: no such variable"), (["-G", "nope"], "-G nope: no such group"),
    (["-G", "g2"], "/g1/g2 is selected but its parent"), (["-c", "nope/3"], "no dimension /nope"),
    (["-c", "w:1,1"], "no variable /w"), (["-c", "g1/w:1"], "has 2 dimensions"),
    (["-c", "x/6"], "exceeds dimension /x (5)"),
])
def test_names_the_source_lacks_are_one_line_exit_2(args: list[str], named: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*args, str(RICH), str(tmp_path / "bad.file")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(RICH) in err and named in err
    assert not (tmp_path / "bad.file").exists()


def test_double_slash_is_no_chunking_as_in_nccopy() -> None:
    # nccopy's chunkspec.c: "Special rule: // is treated as equivalent to /" (netcdf-c run_nccopyz.sh uses -c //)
    assert parse(chunkspecs=["//"]) == parse(chunkspecs=["/"])
    assert parse(chunkspecs=["//"]).unchunk_all


@pytest.mark.parametrize("codec,lowest,highest", [
    ("zlib", 0, zlib.Z_BEST_COMPRESSION),  # zlib.h: 0 (none) to 9
    ("bz2", 1, 9),                         # bzip2's block size, 100k to 900k (Python's bz2: compresslevel 1 to 9)
    ("zstd", 1, ZSTD_MAX_LEVEL),           # numcodecs' ZSTD_maxCLevel(): 22
])
@pytest.mark.parametrize("level", ["x", "99"], ids=["not-a-number", "out-of-range"])
def test_a_bad_compression_level_names_the_codecs_own_range(codec, lowest, highest, level):
    """Both refusals of a level, a word or a number outside the codec's range, give the range the codec itself
    accepts, both ends included."""
    from nczarr_conformance.conversion.transforms import TransformError, parse_compressor

    with pytest.raises(TransformError) as refused:
        parse_compressor(f"{codec}:{level}")
    assert str(refused.value) == f"--compressor '{codec}:{level}': level must be an integer {lowest} to {highest}"
