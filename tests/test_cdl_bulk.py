"""nczarr-dump's bulk data section (cdl/vardata.py) against ncdump 4.9.0 itself, on random data.

The expected text is ncdump's own: a random model is written by our writer as an NCZarr store
ncdump 4.9.0 reads (nczarr-2-upper: fixed dimensions), both dump it with the same ``-l`` and
``-p``, and the texts must be equal but for the first line (the name). Unlimited dimensions
inside a variable (``{…}`` around inner records) need a netCDF-4 file: netcdf-c writes the model
there, and our dump of that file (the same CdlWriter) must equal ncdump's. The data cover all 12
types, fill values (the default and a ``_FillValue``), NaN, ±Infinity, -0.0, subnormals, the
extremes, strings and chars with every escape, ``C_format``, names of every length (where a
row starts) and a group's indent; line lengths from ncdump's minimum up.
"""
from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nczarr_conformance.cdl import vardata
from nczarr_conformance.cdl.json_dump import piece_text, write_json
from nczarr_conformance.cdl.writer import CdlOptions, CdlWriter
from nczarr_conformance.model import (
    Attribute,
    Dataset,
    Dimension,
    Group,
    Variable,
    values_to_json,
)
from nczarr_conformance.nczarr.dtypes import DEFAULT_FILL, NC_TYPES, numpy_dtype
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.sources.dump_source import open_source
from nczarr_conformance.stores.directory import DirectoryStore
from nczarr_conformance.testing.strategies import values
from tests.conftest import require_tool

pytestmark = pytest.mark.peer

#: floats whose %g text is tricky: halfway cases of 7 and 15 digits, exponent edges, powers of ten
TRICKY_FLOATS = [0.5, 1234567.5, 2.5e-7, 9.9999995e-5, 1e-4, 0.0001, 99999.995, 1e16, 1e15, 9.999999e14,
                 123456789012345.5, 1.0000000000000002, 3.4028235e38, 1.17549435e-38, 1e-45, 5e-324, 1e308]
NAME_CHARS = "abcxyzÉ_09 "
MAX_VALUES = 3000  # per variable: a dozen variables stay a quick ncdump
#: per variable where a batch holds 2 or 3 values: each batch is formatted and handed between threads on its own,
#: and a few hundred of them already cross every kind of row, line and batch boundary (more cost time, not cases)
MAX_VALUES_SMALL_BATCH = 600
BATCH_DEFAULT = vardata.BATCH  # the default, read before any test changes it


def _names(used: set[str]) -> st.SearchStrategy[str]:
    """Names from 1 to 40 bytes: where a 1-d variable's values start depends on the name."""
    return st.builds(lambda a, b: (a + b).rstrip(), st.sampled_from("abcxyzé"),
                     st.text(NAME_CHARS, max_size=39)).filter(lambda s: s not in used)


#: strings with every escape ncdump writes, UTF-8 and nothing at all
TRICKY_STRINGS = ["", "plain", 'q"\'\\', "tab\there\nnl\x0bvt\x08\x0c\r", "\x01\x1f\x7f", "ünï 日本 €", "{}[],;",
                  "a" * 90, "é" * 50]


def _random_values(nctype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n values: any bit pattern (NaN payloads, subnormals, every exponent), plain numbers, extremes."""
    if nctype == "string":
        pool = TRICKY_STRINGS + ["".join(map(chr, rng.integers(1, 0x3000, rng.integers(0, 8)))) for _ in range(8)]
        out = np.empty(n, dtype=object)
        out[:] = [pool[i] for i in rng.integers(0, len(pool), n)]
        return out
    dtype = numpy_dtype(nctype)
    if nctype == "char":
        return rng.integers(0, 256, n, dtype=np.uint8).view("S1")
    bits = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype)
    if dtype.kind != "f":
        info = np.iinfo(dtype)
        edges = np.array([info.min, info.max, 0, 1, -1 if info.min else 2], dtype=dtype)
        return np.where(rng.random(n) < 0.2, edges[rng.integers(0, len(edges), n)], bits)
    fi = np.finfo(dtype)
    edges = np.array([*TRICKY_FLOATS, 0.0, -0.0, np.nan, np.inf, -np.inf, float(fi.max), float(fi.min),
                       float(fi.tiny), float(fi.smallest_subnormal)], dtype=np.float64)
    with np.errstate(over="ignore"):
        plain = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 9, n)).astype(dtype)
        pick = rng.integers(0, 3, n)
        return np.select([pick == 0, pick == 1], [bits, edges[rng.integers(0, len(edges), n)].astype(dtype)], plain)


@st.composite
def _data(draw: st.DrawFn, nctype: str, shape: tuple[int, ...], fill: object) -> np.ndarray:
    """Random values (numpy from a drawn seed: thousands of values cost one draw) with the fill put in."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    arr = _random_values(nctype, math.prod(shape), rng)
    if arr.size and fill is not None:
        arr[rng.integers(0, arr.size, rng.integers(0, 5))] = fill
    return arr.reshape(shape)


@st.composite
def _variable(draw: st.DrawFn, nctype: str, dims: dict[str, Dimension], min_rank: int, max_values: int) -> Variable:
    names = draw(st.lists(st.sampled_from(sorted(dims)), min_size=min_rank, max_size=3))
    while len(names) > max(1, min_rank) and math.prod(dims[d].size for d in names) > max_values:
        names.pop()
    shape = tuple(dims[d].size for d in names)
    attrs: dict[str, Attribute] = {}
    fill: object = DEFAULT_FILL.get(nctype)
    if nctype not in ("char", "string") and draw(st.booleans()):
        own = draw(values(nctype, (1,)))
        attrs["_FillValue"] = Attribute(nctype, own)
        fill = own[0]
    if nctype in ("float", "double") and draw(st.integers(0, 5)) == 0:
        attrs["C_format"] = Attribute("char", draw(st.sampled_from(["%.3f", "%10.4e", "%g", "%.12g"])))
    if nctype in ("char", "string") or (isinstance(fill, float) and math.isnan(fill)):
        fill = None
    data = draw(_data(nctype, shape, fill))
    return Variable(nctype, [f"/{d}" for d in names], shape, attrs, data)


@st.composite
def dump_models(draw: st.DrawFn, *, netcdf4: bool, max_values: int = MAX_VALUES) -> Dataset:
    """Every type once at the root and a few in a group (two more columns of indent).

    ``netcdf4``: for a netCDF-4 file, with unlimited dimensions, strings and scalars; else for
    an nczarr-2-upper store, which netcdf-c 4.9.0 reads only without them. ``max_values``: a variable's
    rank is cut until it holds no more (a 1-d variable holds a dimension's 90 at most).
    """
    types = NC_TYPES if netcdf4 else [t for t in NC_TYPES if t != "string"]
    min_rank = 0 if netcdf4 else 1
    sizes = draw(st.lists(st.one_of(st.integers(1, 4), st.integers(5, 90)), min_size=1, max_size=3))
    dims = {f"d{i}": Dimension(n, netcdf4 and draw(st.booleans())) for i, n in enumerate(sizes)}
    root, sub = Group(dimensions=dims), Group()
    used: set[str] = set()
    for nctype in types:
        name = draw(_names(used))
        used.add(name)
        root.variables[name] = draw(_variable(nctype, dims, min_rank, max_values))
    for nctype in draw(st.lists(st.sampled_from(types), max_size=3, unique=True)):
        name = draw(_names(used))
        used.add(name)
        sub.variables[name] = draw(_variable(nctype, dims, min_rank, max_values))
    if sub.variables:
        root.groups["g"] = sub
    if netcdf4:
        root.variables.update(draw(_times(dims, max_values)))
    return Dataset(root)


@st.composite
def _times(draw: st.DrawFn, dims: dict[str, Dimension], max_values: int) -> dict[str, Variable]:
    """CF times (``-t`` prints them as dates): hours as doubles with a fill, days as ints."""
    names = draw(st.lists(st.sampled_from(sorted(dims)), min_size=1, max_size=2))
    while len(names) > 1 and math.prod(dims[d].size for d in names) > max_values:
        names.pop()
    shape = tuple(dims[d].size for d in names)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    hours = np.round(rng.uniform(-1e5, 1e6, shape) * 4) / 4
    hours.reshape(-1)[rng.integers(0, hours.size, 2)] = -1.0
    refs = [f"/{d}" for d in names]
    return {"hours": Variable("double", refs, shape, {"units": Attribute("char", "hours since 2000-01-01 00:00:00"),
                                                       "_FillValue": Attribute("double", np.array([-1.0]))}, hours),
            "days": Variable("int", refs, shape, {"units": Attribute("char", "days since 1900-01-01"),
                                                  "calendar": Attribute("char", "noleap")},
                             rng.integers(0, 60000, shape, dtype=np.int32))}


def _ours(url: str, options: CdlOptions) -> str:
    buf = io.StringIO()
    with open_source(url) as source:
        CdlWriter(source.dataset, buf.write, options, source.slabs, source.facts).dump("x")
    return buf.getvalue()


def _ncdump(url: str, line_length: int, digits: tuple[int | None, int | None], times: bool = False) -> str:
    flags = ["-l", str(line_length)] + (["-t"] if times else [])
    if digits[0] is not None:
        flags += ["-p", ",".join(str(d) for d in digits if d is not None)]
    done = subprocess.run([require_tool("ncdump"), *flags, url], capture_output=True, timeout=60, check=True)
    return done.stdout.decode("utf-8", "surrogateescape")


def _same_after_name(ours: str, theirs: str) -> None:
    assert ours.split("\n", 1)[1] == theirs.split("\n", 1)[1]


LINE_LENGTHS = st.sampled_from([10, 11, 12, 13, 17, 24, 40, 80, 81, 132])
#: ``-p F`` or ``-p F,D`` (ncdump 4.9.0 ignores ``-p ,D`` and refuses ``-p F,``)
DIGITS = st.one_of(st.just((None, None)),
                   st.tuples(st.sampled_from([1, 2, 7, 9, 12, 20]), st.sampled_from([None, 1, 6, 11, 15, 17, 20])))


@st.composite
def batch_and_model(draw: st.DrawFn, *, netcdf4: bool, small: int) -> tuple[int, Dataset]:
    """vardata.BATCH (``small`` values: rows and batches split mid-row too; or the default) and a model for it:
    with a small batch, variables of MAX_VALUES_SMALL_BATCH values at most."""
    batch = draw(st.sampled_from([small, BATCH_DEFAULT]))
    max_values = MAX_VALUES if batch == BATCH_DEFAULT else MAX_VALUES_SMALL_BATCH
    return batch, draw(dump_models(netcdf4=netcdf4, max_values=max_values))


@settings(max_examples=30)
@given(case=batch_and_model(netcdf4=False, small=3), line_length=LINE_LENGTHS, digits=DIGITS)
def test_dump_of_our_store_is_ncdumps_text(case, line_length, digits, monkeypatch_module):
    """Our writer's store, dumped by both: every type, fill, special float, escape and line break."""
    batch, model = case
    monkeypatch_module.setattr(vardata, "BATCH", batch)
    where = Path(tempfile.mkdtemp(prefix="ncz-bulk-"))
    try:
        with DirectoryStore(where / "s.file", "w") as store:
            write_dataset(model, store, flavor="nczarr-2-upper")
        url = f"file://{where / 's.file'}#mode=nczarr,file"
        options = CdlOptions(float_digits=digits[0], double_digits=digits[1], line_length=line_length)
        _same_after_name(_ours(url, options), _ncdump(url, line_length, digits))
    finally:
        shutil.rmtree(where, ignore_errors=True)


@settings(max_examples=20)
@given(case=batch_and_model(netcdf4=True, small=2), line_length=LINE_LENGTHS, digits=DIGITS, times=st.booleans())
def test_dump_of_a_netcdf4_file_is_ncdumps_text(case, line_length, digits, times, monkeypatch_module):
    """A netCDF-4 file written by netcdf-c: strings, scalars, inner unlimited dimensions (``{…}``), -t dates."""
    batch, model = case
    from nczarr_conformance.peers import netcdf4 as nc_peer

    monkeypatch_module.setattr(vardata, "BATCH", batch)
    where = Path(tempfile.mkdtemp(prefix="ncz-bulk-"))
    try:
        path = str(where / "u.nc")
        nc_peer.write(model, path)
        options = CdlOptions(float_digits=digits[0], double_digits=digits[1], line_length=line_length, times=times)
        _same_after_name(_ours(path, options), _ncdump(path, line_length, digits, times))
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_numbers_past_a_batch_wrap_as_in_one(monkeypatch_module):
    """A 1-d row longer than a batch and 2-d rows longer than one: the same text as with one batch."""
    model = Dataset(Group(dimensions={"n": Dimension(50), "m": Dimension(3)}))
    rng = np.random.default_rng(26)
    model.root.variables["v"] = Variable("float", ["/n"], (50,), data=rng.standard_normal(50).astype("f4"))
    model.root.variables["w"] = Variable("double", ["/m", "/n"], (3, 50),
                                         data=rng.standard_normal(150) * 1e5)
    model.root.variables["s"] = Variable("string", ["/m", "/n"], (3, 50),
                                         data=np.array(["é\x01", "a", ""] * 50, dtype=object).reshape(3, 50))
    from nczarr_conformance.cdl.writer import to_cdl

    whole = to_cdl(model, "x")
    for batch in (1, 2, 7, 49, 50, 51):
        monkeypatch_module.setattr(vardata, "BATCH", batch)
        assert to_cdl(model, "x") == whole, batch



def test_a_variable_of_many_batches_is_formatted_ahead_on_a_second_thread(monkeypatch_module):
    """The dump's speed on two cores (benchmarks/dump.py): the next batch is formatted on another thread
    while this one is laid out and written, under the caller's floating-point error state (numpy's is per
    thread: a worker left at numpy's default would print warnings the caller silenced); a variable of one
    batch is formatted in line. The text is the same (the test above, the CDL baselines)."""
    import threading

    seen: list[tuple[str, str]] = []

    def items(values: np.ndarray):
        seen.append((threading.current_thread().name, np.geterr()["invalid"]))
        return formatter.items(values)

    from nczarr_conformance.cdl.text import ValueFormatter

    formatter = ValueFormatter("float", np.float32(-np.inf), None, 7, 15)
    monkeypatch_module.setattr(vardata, "BATCH", 10)
    out: list[str] = []
    for shape in ((6, 10), (60,), (2, 4)):  # rows of a batch each; one long row in six batches; one batch
        seen.clear()
        data = np.arange(math.prod(shape), dtype="f4").reshape(shape)
        section = vardata.DataSection(out.append, shape, [False] * len(shape), 0, 80, items)
        with np.errstate(all="ignore"):
            section.rows([data]) if len(shape) == 2 else section.one_row([data], 5)
        threads = {name for name, _ in seen[:-1]}  # a long row's last value is formatted after the others
        if math.prod(shape) > vardata.BATCH:
            assert threads and all(name.startswith("nczarr-dump-format") for name in threads), (shape, seen)
        else:
            assert seen == [("MainThread", "ignore")], (shape, seen)
        assert {state for _, state in seen} == {"ignore"}, (shape, seen)


def test_a_c_format_text_is_cut_where_ncdumps_buffer_ends(tmp_path):
    """dumplib.c formats a value into 100 bytes: ``%.3f`` of 1e300 prints its first 99 (we printed 305)."""
    model = Dataset(Group(dimensions={"n": Dimension(3)}))
    model.root.variables["big"] = Variable("double", ["/n"], (3,), {"C_format": Attribute("char", "%.3f")},
                                           np.array([1e300, -1e120, 1.5]))
    model.root.variables["wide"] = Variable("int", ["/n"], (3,), {"C_format": Attribute("char", "%0120d")},
                                            np.array([1, -2, 3], dtype=np.int32))
    with DirectoryStore(tmp_path / "s.file", "w") as store:
        write_dataset(model, store, flavor="nczarr-2-upper")
    url = f"file://{tmp_path / 's.file'}#mode=nczarr,file"
    theirs = _ncdump(url, 80, (None, None))
    cut = "100000000000000005250476025520442024870446858110815915491585411551180245798890819578637137508044786"
    assert len(cut) == 99 and f"\n    {cut}, \n" in theirs and f"\n    {'0' * 99} ;\n" in theirs  # ncdump's cut
    _same_after_name(_ours(url, CdlOptions()), theirs)


# ---- --json -------------------------------------------------------------------------------------

def _reference_json(piece: np.ndarray, nctype: str) -> str:
    """What the model's contract makes of the values (numpy's str of each float, json.dumps of all)."""
    return json.dumps(values_to_json(piece, nctype), ensure_ascii=False)[1:-1] if piece.shape[0] else ""


@settings(max_examples=60)
@given(nctype=st.sampled_from(NC_TYPES), shape=st.lists(st.integers(0, 7), min_size=1, max_size=3),
       seed=st.integers(0, 2**32 - 1))
def test_json_of_a_piece_is_json_dumps_of_the_model_values(nctype, shape, seed):
    """Every type, rank 1 to 3, empty inner dimensions too: bulk text == json.dumps(values_to_json(...))."""
    piece = _random_values(nctype, math.prod(shape), np.random.default_rng(seed)).reshape(shape)
    with np.errstate(all="ignore"):
        assert piece_text(piece, nctype) == _reference_json(piece, nctype)


def test_json_floats_at_every_binade_edge_and_random_bits():
    """float32's shortest decimal where the rounding interval is lopsided (each power of two, below
    and above it), at every subnormal edge, and on 200,000 random bit patterns."""
    powers = np.ldexp(np.float32(1), np.arange(-149, 128)).astype(np.float32)
    edges = np.concatenate([powers, np.nextafter(powers, np.float32(0)), np.nextafter(powers, np.float32(np.inf)),
                            np.array([np.finfo(np.float32).max, np.finfo(np.float32).tiny, 0.1, 0.3, 1e16, 1e-5,
                                      1e-4, 9.999999e15, 16777216, 123456790], dtype=np.float32)])
    bits = np.random.default_rng(26).integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    for floats in (edges, -edges, bits):
        with np.errstate(all="ignore"):
            assert piece_text(floats, "float") == _reference_json(floats, "float")


def _numpy_json_float(x: float) -> str:
    """The JSON text of one float32 as the model's contract makes it: numpy's shortest ``str``, as a Python float."""
    return repr(float(str(np.float32(x))))


def _json_floats_left_to_python(floats: np.ndarray, monkeypatch) -> tuple[str, list[float]]:
    """piece_text of ``floats`` and the values it handed to the one-value fallback (json_dump._shortest_python)."""
    from nczarr_conformance.cdl import json_dump

    handed: list[float] = []
    fallback = json_dump._shortest_python

    def counted(value: float) -> str:
        handed.append(value)
        return fallback(value)

    monkeypatch.setattr(json_dump, "_shortest_python", counted)
    with np.errstate(all="ignore"):
        return piece_text(floats, "float"), handed


def test_json_powers_of_two_above_a_lopsided_interval_are_formatted_in_bulk(monkeypatch):
    """format_shortest32's documented power-of-two rule: below a power of two the float32 spacing halves, so the
    rounding interval is narrower below; where the closest decimal of the shortest length falls out of it, the
    one above is taken, in bulk. Which powers those are is worked out here from Python's ``e`` format and numpy's
    shortest ``str`` (2**-96, 2**87, 2**90), not from our code; each must come out as numpy's text, and none
    may be left to the one-value fallback (removing the rule only moved them there: the text stayed right)."""
    ups = []
    for x in np.ldexp(np.float32(1), np.arange(-125, 128)).astype(np.float32).tolist():
        shown = str(np.float32(x)).split("e")[0].replace(".", "").strip("0")
        closest = float(f"{x:.{max(len(shown), 1) - 1}e}")
        if np.float32(closest) != np.float32(x):
            ups.append(x)
    assert len(ups) >= 3
    floats = np.array(ups, dtype=np.float32)
    text, handed = _json_floats_left_to_python(floats, monkeypatch)
    assert text == ", ".join(_numpy_json_float(x) for x in ups)
    assert handed == []


def test_json_floats_leave_few_values_to_python(monkeypatch):
    """The bulk path is the path: of 200,000 random float32 bit patterns (every exponent), fewer than one in ten
    may go to the one-value fallback (about one in twenty do: the near-ties and interval ends on a whole unit the
    docstring names). A wrong power-of-ten index still gives the right text, through the fallback, for three
    values in four: only this count sees it."""
    bits = np.random.default_rng(26).integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    floats = bits[np.isfinite(bits) & (bits != 0)]
    text, handed = _json_floats_left_to_python(floats, monkeypatch)
    assert text == ", ".join(_numpy_json_float(x) for x in floats.tolist())
    assert len(handed) < floats.size // 10, f"{len(handed)} of {floats.size} values formatted one by one"



def test_json_dump_of_a_store_parses_to_the_model(tmp_path):
    """nczarr-dump --json of a store with 11 types (random bits: NaN, ±Infinity, -0, subnormals) is,
    parsed, the model's to_json."""
    from nczarr_conformance.nczarr.reader import read_dataset

    rng = np.random.default_rng(3)
    root = Group(dimensions={"a": Dimension(5), "b": Dimension(3)})
    for nctype in NC_TYPES:
        if nctype != "string":
            root.variables[f"v_{nctype}"] = Variable(nctype, ["/a", "/b"], (5, 3),
                                                     data=_random_values(nctype, 15, rng).reshape(5, 3))
    with DirectoryStore(tmp_path / "s.file", "w") as store:
        write_dataset(Dataset(root), store, flavor="nczarr-2-upper")
    out = io.StringIO()
    with open_source(str(tmp_path / "s.file")) as source:
        write_json(source, out.write, data=True, storage=False)
    model = read_dataset(DirectoryStore(tmp_path / "s.file"))
    assert json.loads(out.getvalue()) == json.loads(json.dumps(model.to_json(storage=False)))


@pytest.mark.parametrize("line_length", [10, 23, 80])
def test_rows_all_fill_print_as_ncdump_prints_them(tmp_path, line_length, monkeypatch_module):
    """Batches whose rows are all fill are rendered once and repeated: the text is still ncdump's
    (fill rows first, last, between others; the variable's last row in such a batch)."""
    monkeypatch_module.setattr(vardata, "BATCH", 40)  # a batch is 4 rows of 10
    root = Group(dimensions={"r": Dimension(16), "c": Dimension(10)})
    fill = np.float32(DEFAULT_FILL["float"])
    data = np.random.default_rng(5).gamma(0.5, 3.0, (16, 10)).astype("f4")
    data[:5] = fill
    data[10:] = fill  # batches: 4 fill rows, mixed, mixed, 4 fill rows ending the variable
    root.variables["some_fill"] = Variable("float", ["/r", "/c"], (16, 10), data=data)
    root.variables["all_fill"] = Variable("int", ["/r", "/c"], (16, 10),
                                          data=np.full((16, 10), DEFAULT_FILL["int"], dtype="i4"))
    root.variables["own_fill"] = Variable("double", ["/r", "/c"], (16, 10),
                                          {"_FillValue": Attribute("double", np.array([-1.0]))},
                                          np.where(np.arange(160).reshape(16, 10) < 70, -1.0, 2.5))
    with DirectoryStore(tmp_path / "s.file", "w") as store:
        write_dataset(Dataset(root), store, flavor="nczarr-2-upper")
    url = f"file://{tmp_path / 's.file'}#mode=nczarr,file"
    _same_after_name(_ours(url, CdlOptions(line_length=line_length)), _ncdump(url, line_length, (None, None)))


@pytest.mark.parametrize("line_length", [10, 17, 80])
def test_a_long_row_of_fill_wraps_as_ncdump_wraps_it(tmp_path, line_length, monkeypatch_module):
    """A 1-d variable whose batches are all fill is wrapped arithmetically (as many pieces on each
    line): still ncdump's text, from any column (short and long names), between runs of data."""
    monkeypatch_module.setattr(vardata, "BATCH", 37)
    root = Group(dimensions={"n": Dimension(500)})
    fill = np.float32(DEFAULT_FILL["float"])
    data = np.full(500, fill, dtype="f4")
    data[200:260] = np.random.default_rng(7).gamma(0.5, 3.0, 60)
    root.variables["x"] = Variable("float", ["/n"], (500,), data=data)
    root.variables["a_rather_long_name_for_a_variable"] = Variable("short", ["/n"], (500,),
                                                                   data=np.full(500, -32767, dtype="i2"))
    with DirectoryStore(tmp_path / "s.file", "w") as store:
        write_dataset(Dataset(root), store, flavor="nczarr-2-upper")
    url = f"file://{tmp_path / 's.file'}#mode=nczarr,file"
    _same_after_name(_ours(url, CdlOptions(line_length=line_length)), _ncdump(url, line_length, (None, None)))
