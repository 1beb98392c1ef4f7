"""Hypothesis strategies for canonical netCDF-4 models, composed small to large.

``names`` → ``attributes`` → ``variables`` (via ``variable_for``) → ``groups`` →
``datasets``. Alphabets and sizes are small on purpose: shrinking stays fast and
the interesting cases (edge values, NUL bytes, non-ASCII, fill showing through,
chunks that do not divide the shape) are drawn often.

Example::

    datasets().example()  # doctest: +SKIP
"""
from __future__ import annotations

import math
import unicodedata
from typing import Any, Literal

import numpy as np
from hypothesis import strategies as st

from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable
from nczarr_conformance.nczarr.dtypes import (
    DEFAULT_FILL,
    NC_TYPES,
    NUMERIC,
    numpy_dtype,
)
from nczarr_conformance.testing.samples import JSON_LOOKING

__all__ = ["attribute_sets", "attributes", "corners", "datasets", "long_strings", "names", "values"]

#: letters and digits plus a few precomposed non-ASCII letters: netCDF names are NFC UTF-8
NAME_FIRST = "abcxyzABZ" + "éßΩж"
NAME_REST = NAME_FIRST + "0129_-.+ "
#: text without NUL (C strings end there) and without surrogates (not UTF-8)
TEXT = st.characters(codec="utf-8", exclude_characters="\x00")
#: text netcdf-c must keep byte for byte in both directions (issue 13): accents, CJK, JSON-looking
SPECIAL_TEXT = ["héllo wörld", "日本語", '{"a": [1, 2]}', "[1,2]", "42", "true", "null", '"quoted"', "tab\there"]
#: long strings cross netcdf-c's default _nczarr_maxstrlen (128 bytes) up to 300 bytes; drawn by
#: repeating one character (1, 2 or 3 UTF-8 bytes) so a 300-byte string costs one draw, not 300
LONG_UNIT = ["a", "é", "日", "\x01", "}"]


def names(*, max_size: int = 5) -> st.SearchStrategy[str]:
    """netCDF names: a letter first, no '/', no trailing space, NFC-normalised."""
    return st.builds(lambda a, b: (a + b).rstrip(" "), st.sampled_from(NAME_FIRST),
                     st.text(NAME_REST, max_size=max_size - 1)).filter(
        lambda s: unicodedata.normalize("NFC", s) == s)


def _element(nctype: str) -> st.SearchStrategy[Any]:
    if nctype in ("float", "double"):
        width: Literal[32, 64] = 32 if nctype == "float" else 64
        edge = st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.0,
                                float(np.finfo(f"f{width // 8}").smallest_subnormal),
                                float(np.finfo(f"f{width // 8}").max), float(np.finfo(f"f{width // 8}").min)])
        return st.one_of(edge, st.floats(width=width))
    if nctype == "char":
        return st.one_of(st.sampled_from([b"\x00", b"\xe9", b"{"]), st.binary(min_size=1, max_size=1))
    if nctype == "string":
        return st.one_of(st.text(TEXT, max_size=6), st.sampled_from(SPECIAL_TEXT), long_strings())
    info = np.iinfo(NUMERIC[nctype])
    return st.one_of(st.sampled_from([int(info.min), int(info.max), 0]), st.integers(int(info.min), int(info.max)))


def long_strings(*, max_bytes: int = 300) -> st.SearchStrategy[str]:
    """Strings of 100 to ``max_bytes`` UTF-8 bytes (netcdf-c's default maxstrlen is 128)."""
    return st.sampled_from(LONG_UNIT).flatmap(
        lambda unit: st.integers(100 // len(unit.encode()), max_bytes // len(unit.encode())).map(lambda n: unit * n))


def values(nctype: str, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """An array of model values of one type and shape."""
    n = math.prod(shape)
    dtype = numpy_dtype(nctype)

    def build(items: list[Any]) -> np.ndarray:
        if nctype == "string":
            arr = np.empty(n, dtype=object)
            arr[:] = items
        else:
            arr = np.array(items, dtype=dtype) if items else np.zeros(0, dtype=dtype)
        return arr.reshape(shape)

    return st.lists(_element(nctype), min_size=n, max_size=n).map(build)


def _char_text() -> st.SearchStrategy[str]:
    """Char attribute text: JSON-looking, accents and CJK, NUL inside, long, or anything."""
    return st.one_of(st.sampled_from(sorted(set(JSON_LOOKING.values()) | set(SPECIAL_TEXT) | {"a\x00b"})),
                     st.text(TEXT, max_size=8), long_strings())


@st.composite
def attributes(draw: st.DrawFn, nctype: str | None = None) -> Attribute:
    """One attribute of any (or the given) type: char text often looks like JSON."""
    nctype = nctype or draw(st.sampled_from(NC_TYPES))
    if nctype == "char":
        return Attribute("char", draw(_char_text()))
    n = draw(st.integers(1, 3))
    return Attribute(nctype, draw(values(nctype, (n,))))


def attribute_sets(*, max_size: int = 3) -> st.SearchStrategy[dict[str, Attribute]]:
    return st.dictionaries(names(), attributes(), max_size=max_size)


FILTER_CHOICES = [None, "zlib", "shuffle", "shuffle+zlib"]
#: how much of a variable is written: all, a random subset, a leading slab (the rest never written:
#: whole chunks stay unstored), or nothing (no stored chunk at all)
WRITTEN = ["all", "some", "slab", "none"]


@st.composite
def variable_for(draw: st.DrawFn, visible: dict[str, Dimension]) -> Variable:
    """A variable over dimensions visible from its group, maybe only partly written."""
    nctype = draw(st.sampled_from(NC_TYPES))
    dim_names = draw(st.lists(st.sampled_from(sorted(visible)), max_size=3)) if visible else []
    shape = tuple(visible[d].size for d in dim_names)
    data = draw(values(nctype, shape))
    attrs = draw(attribute_sets(max_size=2))
    attrs = {k: v for k, v in attrs.items() if k != "_FillValue"}
    fill: Any = None
    if draw(st.booleans()):
        if nctype == "char":
            # ASCII only: a non-ASCII char fill is ambiguous (issue 13 report)
            fill = draw(st.sampled_from([b"\x00", b" ", b"_", b"x"]))
            fill_attr = Attribute("char", fill.decode("latin-1"))
        elif nctype == "string":
            fill = draw(st.sampled_from(["", "fill", "日本語", "N/A"]))
            fill_attr = Attribute("string", np.array([fill], dtype=object))
        else:
            fill_attr = Attribute(nctype, draw(values(nctype, (1,))))
            fill = fill_attr.value[0]
        attrs["_FillValue"] = fill_attr
    size = int(np.prod(shape)) if shape else 0
    written = draw(st.sampled_from(WRITTEN)) if size else "all"
    if written != "all":
        fill_value = fill if fill is not None else DEFAULT_FILL[nctype]
        if nctype == "char" and isinstance(fill_value, str):
            fill_value = fill_value.encode("latin-1")
        if written == "some":
            mask = np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
        else:  # a leading slab along the first axis, or nothing
            keep = draw(st.integers(0, shape[0] - 1)) if written == "slab" else 0
            mask = np.ones(shape, dtype=bool)
            mask[:keep] = False
            mask = mask.reshape(-1)
        flat = data.reshape(-1).copy()
        flat[mask] = fill_value
        data = flat.reshape(shape)
    chunks: list[int] | None = None
    chunked: bool = draw(st.booleans())
    if shape and chunked:
        chunks = [draw(st.integers(1, max(1, s) + 2)) for s in shape]
    endianness = None
    if nctype in NUMERIC and NUMERIC[nctype][1] != "1":
        endianness = draw(st.sampled_from(["little", "big"]))
    filters = None
    choice = draw(st.sampled_from(FILTER_CHOICES)) if nctype != "string" else None
    if choice:
        itemsize = 1 if nctype == "char" else np.dtype(NUMERIC[nctype]).itemsize
        filters = ([{"id": "shuffle", "elementsize": itemsize}] if "shuffle" in choice else []) + \
            ([{"id": "zlib", "level": draw(st.integers(1, 9))}] if "zlib" in choice else [])
    return Variable(nctype, dim_names, shape, attrs, data, chunks=chunks, endianness=endianness, filters=filters)


@st.composite
def groups(draw: st.DrawFn, path: str = "/", inherited: dict[str, Dimension] | None = None,
           depth: int = 0, max_depth: int = 2) -> Group:
    """A group with its own dimensions (some unlimited), variables over visible ones, sub-groups."""
    inherited = dict(inherited or {})
    group = Group()
    for name in draw(st.lists(names(), max_size=2, unique=True)):
        unlimited = draw(st.booleans())
        size = draw(st.integers(0 if unlimited else 1, 4))
        group.dimensions[name] = Dimension(size, unlimited)
    visible = {**inherited, **{f"{path.rstrip('/')}/{n}": d for n, d in group.dimensions.items()}}
    # nearest definition wins for a name: drop shadowed ancestor dims
    by_name: dict[str, str] = {}
    for fqn in visible:
        by_name[fqn.rsplit("/", 1)[1]] = fqn
    visible = {fqn: visible[fqn] for fqn in by_name.values()}
    group.attributes = draw(attribute_sets())
    for name in draw(st.lists(names(), max_size=3, unique=True)):
        group.variables[name] = draw(variable_for(visible))
    if depth < max_depth:
        for name in draw(st.lists(names(), max_size=2, unique=True)):
            if name in group.variables:
                continue
            group.groups[name] = draw(groups(f"{path.rstrip('/')}/{name}", visible, depth + 1, max_depth))
    return group


def _settle_unlimited(dataset: Dataset) -> Dataset:
    """netCDF grows an unlimited dimension only by writing: one that no non-empty variable
    spans has length 0 (and so has every variable along it)."""
    variables = [v for _, g in dataset.root.walk() for v in g.variables.values()]
    changed = True
    while changed:
        changed = False
        written = {d for v in variables if math.prod(v.shape) for d in v.dimensions}
        for gkey, group in dataset.root.walk():
            for name, dim in group.dimensions.items():
                fqn = f"{gkey.rstrip('/')}/{name}"
                if dim.unlimited and dim.size and fqn not in written:
                    dim.size = 0
                    changed = True
                    for v in variables:
                        if fqn in v.dimensions:
                            v.shape = tuple(0 if d == fqn else s for d, s in zip(v.dimensions, v.shape, strict=True))
                            v.data = np.asarray(v.data).reshape(-1)[:0].reshape(v.shape)
    return dataset


def datasets(*, max_depth: int = 2) -> st.SearchStrategy[Dataset]:
    """Whole canonical models, groups nested ``max_depth`` deep below the root."""
    return groups(max_depth=max_depth).map(lambda g: _settle_unlimited(Dataset(g)))



def corners() -> Dataset:
    """One model holding every corner at once, for ``@example`` on every property: all 12 types,
    both byte orders, shuffle alone, zlib alone and both, fill values of every type (NaN, a NUL
    char, a string), a leading slab written and the rest never, a variable with no stored chunk,
    an unlimited dimension, a scalar, strings of 300 bytes, NUL and non-ASCII in chars, accents,
    CJK and JSON-looking text in attributes."""
    x, t = "/x", "/t"
    root = Group({"x": Dimension(4), "t": Dimension(2, unlimited=True)}, attributes={
        "accents": Attribute("char", "héllo wörld"), "cjk": Attribute("char", "日本語"),
        "json": Attribute("char", '{"a": [1, 2]}'), "long": Attribute("char", "é" * 150),
        "texts": Attribute("string", np.array(["日本語", "", "a" * 300], dtype=object)),
        "nan": Attribute("double", np.array([math.nan, -0.0])),
        "u64": Attribute("uint64", np.array([np.iinfo("u8").max], dtype="u8"))})

    def fill(nctype: str, value: Any) -> dict[str, Attribute]:
        if nctype == "char":
            return {"_FillValue": Attribute("char", value)}
        if nctype == "string":
            return {"_FillValue": Attribute("string", np.array([value], dtype=object))}
        return {"_FillValue": Attribute(nctype, np.array([value], dtype=numpy_dtype(nctype)))}

    def add(name: str, nctype: str, data: Any, attrs: dict[str, Attribute] | None = None, **storage: Any) -> None:
        arr = np.array(data, dtype=object if nctype == "string" else numpy_dtype(nctype))
        dims = [x] if arr.ndim == 1 else ([t, x] if arr.ndim == 2 else [])
        root.variables[name] = Variable(nctype, dims, arr.shape, attrs or {}, arr, **storage)

    shuffle = {"id": "shuffle", "elementsize": 0}
    zlib = {"id": "zlib", "level": 3}

    def chain(nctype: str, *codecs: dict[str, Any]) -> list[dict[str, Any]]:
        size = 1 if nctype in ("char", "byte", "ubyte") else np.dtype(NUMERIC[nctype]).itemsize
        return [dict(c, elementsize=size) if c["id"] == "shuffle" else dict(c) for c in codecs]

    add("b", "byte", [-128, 127, -7, -7], fill("byte", -7), chunks=[2], filters=chain("byte", zlib))  # slab
    add("ub", "ubyte", [0, 255, 1, 2], chunks=[3], filters=chain("ubyte", shuffle))
    add("s", "short", [-32768, 32767, 0, 1], chunks=[2], endianness="big", filters=chain("short", shuffle, zlib))
    add("us", "ushort", [7, 7, 7, 7], fill("ushort", 7), chunks=[2], endianness="little")  # no stored chunk
    add("i", "int", [-2**31, 2**31 - 1, 0, 5], chunks=[4], endianness="big", filters=chain("int", zlib))
    add("ui", "uint", [0, 2**32 - 1, 3, 4], endianness="little")
    add("i64", "int64", [-2**63, 2**63 - 1, 0, 0], chunks=[1], endianness="big")
    add("u64", "uint64", [0, 2**64 - 1, 1, 2], chunks=[2], endianness="little", filters=chain("uint64", shuffle))
    add("f", "float", [1.5, math.nan, -0.0, math.inf], fill("float", math.nan), chunks=[3], endianness="big",
        filters=chain("float", shuffle))
    add("d", "double", [[0.1, -0.0, 5e-324, 1.7976931348623157e308], [math.nan] * 4],
        chunks=[1, 4], endianness="big", filters=chain("double", zlib))
    add("c", "char", [b"a", b"\x00", b"\xe9", b"\x00"], fill("char", "\x00"), chunks=[2])
    add("str", "string", ["a" * 300, "日本語", "héllo wörld", "N/A"], fill("string", "N/A"))
    add("scalar", "double", 2.5)
    return Dataset(root)
