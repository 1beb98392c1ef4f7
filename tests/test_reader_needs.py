"""Every entry of the reader table (nczarr_conformance/reader_needs.py), held to the reader it names.

For each need, a store is written with exactly the layout the need fires on, and that reader is run on it for
real (the matrix's peers, through conformance/verify.py): it must lose what the entry says (cannot open the
store when the need is fatal; reads something differently otherwise). Then the layout the entry's cure names is
written, and the need must no longer fire *and* the reader must no longer lose it: when no other need of that
reader fires there, it reads the store equal to netCDF4-python reading the source. So a prediction that is
wrong either way turns this file red, and so does a new entry with no recipe here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import netCDF4
import numpy as np
import pytest

from nczarr_conformance import reader_needs
from nczarr_conformance.conformance.verify import verify
from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.sources import netcdf4 as nc4
from tests.conftest import REPO, require_tool


def _write_source(path: Path, kind: str) -> None:
    """A small netCDF-4 file holding one thing a need looks at (and a compressed, shuffled float in all)."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 4)
        nc.title = "needs"
        # a _FillValue where the recipe is about char alone (xarray masks a default fill: xarray-default-fill)
        v = nc.createVariable("v", "f4", ("x",), zlib=True, shuffle=kind == "shuffle",
                              fill_value=-1.0 if kind == "charrow" else None)
        v[:] = np.arange(4, dtype="f4")
        if kind == "char":
            nc.createDimension("n", 3)
            c = nc.createVariable("name", "S1", ("x", "n"))
            c[:] = netCDF4.stringtochar(np.array(["ab", "cde", "f", "ghi"], "S3"))
        elif kind == "strings":
            s = nc.createVariable("s", str, ("x",))
            s[:] = np.array(["a", "bb", "ccc", ""], dtype=object)
        elif kind == "scalar":
            crs = nc.createVariable("crs", "i4")
            crs.grid_mapping_name = "latitude_longitude"
            crs.assignValue(0)
        elif kind == "unlimited":
            nc.createDimension("t", None)  # netCDF-4 chunks it 512 long (1 MiB / 8 bytes ... capped at 512)
            t = nc.createVariable("t", "f8", ("t",))
            t[:] = [0.0, 1.0]
        elif kind == "units":
            v.units = "K"
        elif kind == "bigendian":
            b = nc.createVariable("b", "f4", ("x",), endian="big")
            b[:] = [0.5, 1.0, 2.0, 4.0]
        elif kind == "stringattr":
            nc.setncattr_string("names", ["a", "bb"])
        elif kind == "charrow":  # a row all NUL: an empty string to xarray's netCDF4 engine
            nc.createDimension("n", 3)
            c = nc.createVariable("name", "S1", ("x", "n"))
            c[:] = netCDF4.stringtochar(np.array(["ab", "cde", "", "ghi"], "S3"))
        elif kind == "floatattr":
            v.tenth = np.float32(0.1)  # a float32 attribute: a JSON number, 64-bit to xarray
        elif kind == "shortattr":
            v.valid_min = np.int16(0)  # a short: pure Zarr's JSON gives back an int
        elif kind == "unuseddim":
            nc.createDimension("spare", 5)  # no variable uses it
        elif kind == "ncattr":
            nc.setncattr("_NC_history", "kept by netCDF, a name xarray's zarr engine hides")
            v.setncattr("_ncNote", "the same on a variable")
        elif kind == "nanattr":
            v.missing = np.float64("nan")  # a double: a float32 one is xarray-float-attributes too
        elif kind == "ints":
            level = nc.createVariable("level", "i4", ("x",))  # no _FillValue: netCDF's default fill is the fill
            level[:] = [1, 2, 3, -2147483647]
        elif kind == "int64attr":
            v.big = np.int64(2**62 + 1)
        elif kind == "groups":
            g = nc.createGroup("g")
            g.createDimension("y", 2)
            w = g.createVariable("w", "i2", ("y",))
            w[:] = [1, 2]
            w.units = "m"
            w.valid_min = np.int16(0)  # a short: pure Zarr's JSON gives back an int


@dataclass(frozen=True)
class Recipe:
    """The source to convert and the layout choices that make a need fire, and the output's container."""

    source: str
    choice: dict[str, object] = field(default_factory=dict)
    container: str = "directory"


RECIPES: dict[str, Recipe] = {
    "c410-v3": Recipe("plain", {"zarr_format": 3}),
    "c410-zip": Recipe("plain", {}, "zip"),
    "c410-char-s1": Recipe("char", {"char_as": "S1"}),
    "c410-zarr-scalar": Recipe("scalar", {"flavor": "zarr"}),
    "c410-zarr-types": Recipe("groups", {"flavor": "zarr"}),
    "c490-v3": Recipe("plain", {"zarr_format": 3}),
    "c490-zip": Recipe("plain", {"compression": "none", "flavor": "zarr"}, "zip"),
    "c490-410-keys": Recipe("plain", {"compression": "none"}),
    "c490-zarr-types": Recipe("shortattr", {"compression": "none", "flavor": "zarr"}),
    "c490-codec": Recipe("plain", {"flavor": "zarr"}),
    "c490-char": Recipe("char", {"compression": "none", "flavor": "zarr"}),
    "c490-string": Recipe("strings", {"compression": "none", "flavor": "zarr"}),
    "c490-zarr-scalar": Recipe("scalar", {"flavor": "zarr", "compression": "none"}),
    "zarr-python-zip": Recipe("plain", {}, "zip"),
    "zarr-python-char": Recipe("char", {"char_as": ">S1"}),
    "xarray-zip": Recipe("plain", {}, "zip"),
    "xarray-char": Recipe("char", {"char_as": ">S1"}),
    "xarray-datatree-zip": Recipe("plain", {}, "zip"),
    "xarray-datatree-char": Recipe("char", {"char_as": ">S1"}),
    "ts-zip": Recipe("plain", {"flavor": "zarr"}, "zip"),
    "ts-filters": Recipe("shuffle", {"flavor": "zarr"}),
    "ts-char": Recipe("char", {"flavor": "zarr"}),
    "ts-string-fill": Recipe("strings", {"flavor": "zarr"}),
    "ts-v3-text": Recipe("char", {"zarr_format": 3}),
    "gdal-zip": Recipe("plain", {"flavor": "zarr"}, "zip"),
    "gdal-v3": Recipe("plain", {"zarr_format": 3}),
    "gdal-char-nul": Recipe("char", {"filters": "none"}),
    "gdal-shuffle": Recipe("shuffle", {}),
    "gdal-properties": Recipe("units", {}),
    "gdal-int64-attributes": Recipe("int64attr", {}),
    "c490-chunk-over": Recipe("unlimited", {"compression": "none", "flavor": "zarr"}),
    "c490-byteorder": Recipe("bigendian", {"compression": "none", "flavor": "zarr"}),
    "c490-string-attrs": Recipe("stringattr", {"compression": "none", "flavor": "zarr"}),
    "c490-unlimited": Recipe("unlimited", {"compression": "none", "flavor": "zarr", "chunks": "capped"}),
    "c410-zarr-unlimited": Recipe("unlimited", {"flavor": "zarr"}),
    "ours-zarr-unlimited": Recipe("unlimited", {"flavor": "zarr"}),
    "ours-char-s1": Recipe("char", {"char_as": "S1", "flavor": "nczarr-2"}),
    "xarray-default-fill": Recipe("ints", {}),
    "xarray-nczarr-scalar": Recipe("scalar", {"default_fill": "null"}),
    "xarray-char-fill": Recipe("charrow", {"char_as": "S1"}),
    "xarray-strings": Recipe("strings", {"default_fill": "null"}),
    "xarray-nan-attributes": Recipe("nanattr", {"default_fill": "null"}),
    "c410-zarr-dims": Recipe("unuseddim", {"flavor": "zarr"}),
    "ours-zarr-dims": Recipe("unuseddim", {"flavor": "zarr"}),
    "c490-zarr-dims": Recipe("unuseddim", {"flavor": "zarr", "compression": "none"}),
    "xarray-float-attributes": Recipe("floatattr", {"default_fill": "null"}),
    "xarray-nc-attributes": Recipe("ncattr", {"default_fill": "null"}),
    "ours-zarr-types": Recipe("groups", {"flavor": "zarr"}),
}

NEEDS = [(reader.id, need) for reader in reader_needs.READERS.values() for need in reader.needs]


def test_every_need_has_a_recipe_here() -> None:
    """A need without a recipe would be a prediction no reader was ever run on."""
    assert sorted(RECIPES) == sorted(need.id for _, need in NEEDS)


def test_the_table_refuses_a_reader_or_a_need_twice() -> None:
    with pytest.raises(ValueError, match="twice"):
        reader_needs.register(reader_needs.Reader("xarray", "again", ()))
    need = reader_needs.READERS["gdal"].needs[0]
    with pytest.raises(ValueError, match="twice"):
        reader_needs.register(reader_needs.Reader("gdal-again", "again", (need,)))
    assert "gdal-again" not in reader_needs.READERS


def _sources(tmp: Path) -> dict[str, Path]:
    out = {}
    for kind in ("plain", "shuffle", "char", "strings", "scalar", "groups", "unlimited", "units", "int64attr",
                 "bigendian", "stringattr", "ints", "charrow",
                 "nanattr", "unuseddim", "shortattr", "floatattr", "ncattr"):
        out[kind] = tmp / f"{kind}.nc"
        _write_source(out[kind], kind)
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _sources(tmp_path_factory.mktemp("needs"))


def _write(src: Path, out: Path, choice: dict[str, object]) -> reader_needs.Layout:
    stats = convert(str(src), str(out), choices=choice)
    assert stats.audience is not None
    return stats.audience.layout


def _read(reader: str, out: Path, src: Path, layout: reader_needs.Layout, monkeypatch: pytest.MonkeyPatch):
    if reader == "netcdf-c-4.9":
        require_tool("ncdump")  # Debian's netcdf-bin, through nczarr-conformance.toml's adapter
        monkeypatch.chdir(REPO)
    if reader == "gdal":
        require_tool("gdalmdiminfo")
    [verdict] = verify(str(out), nc4.read(str(src)), [reader], source=str(src))
    assert verdict.status != "absent", verdict.line()
    return verdict


@pytest.mark.peer
@pytest.mark.parametrize("reader,need", NEEDS, ids=[need.id for _, need in NEEDS])
def test_the_reader_loses_what_the_need_says_and_the_cure_cures_it(reader, need, sources, tmp_path, monkeypatch):
    recipe = RECIPES[need.id]
    src = sources[recipe.source]
    suffix = ".zip" if recipe.container == "zip" else ".zarr"
    layout = _write(src, tmp_path / f"fires{suffix}", recipe.choice)
    assert need.when(layout), f"the recipe's layout {layout} does not make {need.id} fire"
    # the one need of this reader that fires (of those that lose the whole store, for a need that does), so what the
    # reader loses is this need's doing
    firing = [n for n in reader_needs.READERS[reader].needs if n.when(layout) and (n.fatal or not need.fatal)]
    assert [n.id for n in firing] == [need.id]
    verdict = _read(reader, tmp_path / f"fires{suffix}", src, layout, monkeypatch)
    assert verdict.status == ("fails" if need.fatal else verdict.status) and verdict.status in ("fails", "differs"), \
        f"{need.id}: predicted '{need.loses}', but {verdict.line()}"
    if need.cure is None:
        return
    cured_choice = {**recipe.choice, **{k: v for k, v in need.cure.items() if k != "container"}}
    cured_suffix = ".zarr" if need.cure.get("container") == "directory" else suffix
    cured = _write(src, tmp_path / f"cured{cured_suffix}", cured_choice)
    assert not need.when(cured), f"{need.id}'s cure {need.cure} leaves it firing"
    others = [n.id for n in reader_needs.READERS[reader].needs if n.when(cured)]
    verdict = _read(reader, tmp_path / f"cured{cured_suffix}", src, cured, monkeypatch)
    if not others:
        assert verdict.status == "equal", f"{need.id} cured by {need.cure}, nothing else predicted: {verdict.line()}"


def test_each_need_names_a_rule_that_exists_and_speaks_of_its_reader() -> None:
    """nczarr-check --for keeps a rule's findings for the readers it speaks of: a need's rule must speak of it."""
    from nczarr_conformance.checker import RULES

    for reader, need in NEEDS:
        if need.rule is not None:
            assert need.rule in RULES, need.id
            assert reader in (reader_needs.readers_of_rule(need.rule) or ()), (need.id, need.rule)


def test_every_prediction_rule_speaks_of_readers_of_the_table() -> None:
    from nczarr_conformance.checker import RULES

    for rid in RULES:
        if rid.startswith("NCZ-INTEROP-"):
            readers = reader_needs.readers_of_rule(rid)
            assert readers, f"{rid} speaks of no reader (reader_needs.RULE_PREFIX_READERS)"
            assert set(readers) <= set(reader_needs.READERS), rid


def test_docs_readers_md_is_generated_from_the_table() -> None:
    assert (REPO / "docs" / "readers.md").read_text(encoding="utf-8") == reader_needs.render_markdown()
