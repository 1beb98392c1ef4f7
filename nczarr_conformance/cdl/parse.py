"""CDL text as ``ncdump`` prints it → canonical model.

Used to read through netcdf-c 4.9.0's ``ncdump`` (the conformance matrix) and to
turn netcdf-c's ``ref_*.cdl`` baselines into models. It covers what ncdump
emits for the netCDF-4 atomic types: dimensions (``UNLIMITED ; // (N currently)``),
typed variable and group attributes with ncgen's suffixes, nested groups, and
the data section with ``_`` for fill, and ``ncdump -s``'s storage facts (``_Storage``,
``_ChunkSizes``, ``_NoFill``, ``_Endianness``, ``_Filter``, ``_Codecs``, ``_Shuffle``,
``_DeflateLevel``, ``_Fletcher32``) into the variables' storage fields; ``storage_stated``
says which fields a text states, so a comparison holds exactly those to account.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from nczarr_conformance.errors import FormatError
from nczarr_conformance.model import (
    Attribute,
    Dataset,
    Dimension,
    Group,
    Variable,
    char_fill_byte,
)
from nczarr_conformance.nczarr.dtypes import DEFAULT_FILL, NC_TYPES, numpy_dtype

PUNCT = set("{}(),;:=")
SUFFIX_TYPES = [("ull", "uint64"), ("ub", "ubyte"), ("us", "ushort"), ("ll", "int64"), ("u", "uint"), ("b", "byte"),
                ("s", "short"), ("l", "int"), ("f", "float"), ("d", "double")]
SPECIAL_FLOATS = {"nan": math.nan, "nanf": math.nan, "infinity": math.inf, "infinityf": math.inf,
                  "-infinity": -math.inf, "-infinityf": -math.inf, "+infinity": math.inf, "+infinityf": math.inf}
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a", "\\": "\\", '"': '"',
           "'": "'", "?": "?"}
CURRENT = re.compile(r"//\s*\((\d+) currently\)")
#: CDL "virtual" attributes: storage settings for ncgen, shown by ncdump -s, not attributes of the data
VIRTUAL_ATTRIBUTES = frozenset({"_Storage", "_ChunkSizes", "_Format", "_NoFill", "_Endianness", "_DeflateLevel",
                                "_Shuffle", "_Fletcher32", "_Filter", "_Codecs", "_NCProperties", "_IsNetcdf4",
                                "_SuperblockVersion", "_Quantize"})


@dataclass
class Token:
    kind: str  # "name", "string", "punct", "current", "fill", or "braces" (a ``{…}`` data group)
    text: str
    items: list[Token] | None = None  # a "braces" token's values


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            m = CURRENT.match(text[i:end])
            if m:
                tokens.append(Token("current", m.group(1)))
            i = end
        elif c == '"':
            i, value = _string(text, i + 1, '"')
            tokens.append(Token("string", value))
        elif c == "'":
            i, value = _string(text, i + 1, "'")  # a char constant, '\0' or 'a'
            tokens.append(Token("string", value))
        elif c in PUNCT:
            tokens.append(Token("punct", c))
            i += 1
        else:
            j, out = i, []
            while j < n and not text[j].isspace() and text[j] not in PUNCT and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    out.append(text[j + 1])
                    j += 2
                    continue
                out.append(text[j])
                j += 1
            word = "".join(out)
            tokens.append(Token("fill" if word == "_" else "name", word))
            i = j
    return tokens


def _string(text: str, i: int, quote: str) -> tuple[int, str]:
    out: list[str] = []
    while i < len(text):
        c = text[i]
        if c == quote:
            return i + 1, "".join(out)
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "01234567":
                m = re.match(r"[0-7]{1,3}", text[i + 1:])
                assert m is not None
                out.append(chr(int(m.group(0), 8)))
                i += 1 + len(m.group(0))
                continue
            if nxt == "x":
                m = re.match(r"[0-9a-fA-F]{1,2}", text[i + 2:])
                if m:
                    out.append(chr(int(m.group(0), 16)))
                    i += 2 + len(m.group(0))
                    continue
            out.append(ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    raise FormatError("CDL: unterminated string")


def _number(word: str) -> tuple[Any, str | None]:
    """(value, type from suffix or None) of a CDL numeric literal."""
    low = word.lower()
    if low in SPECIAL_FLOATS:
        return SPECIAL_FLOATS[low], "float" if low.endswith("f") else "double"
    for suffix, nctype in SUFFIX_TYPES:
        if low.endswith(suffix) and low[: -len(suffix)] and not low.startswith("0x"):
            body = low[: -len(suffix)]
            if nctype in ("float", "double"):
                return float(body), nctype
            if re.fullmatch(r"[-+]?\d+", body):
                return int(body), nctype
    if re.fullmatch(r"[-+]?\d+", low):
        return int(low), None
    try:
        return float(low), "double"
    except ValueError:
        raise FormatError(f"CDL: {word!r} is not a number") from None


def _float(word: str) -> float:
    """A float literal keeping the sign of zero (ncdump prints -0.0 as ``-0``)."""
    value, _ = _number(word)
    body = word.rstrip("fFdD") if word.lower() not in SPECIAL_FLOATS else word
    return float(body) if isinstance(value, int) else float(value)


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.i = 0
        #: storage virtual attributes (ncdump -s) by variable, applied once the whole text is read
        self.specials: list[tuple[Variable, dict[str, list[Token]]]] = []
        self.seen: dict[int, dict[str, list[Token]]] = {}

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def take(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise FormatError("CDL: unexpected end of text")
        self.i += 1
        return tok

    def expect(self, text: str) -> None:
        tok = self.take()
        if tok.text != text or tok.kind not in ("punct", "name"):
            raise FormatError(f"CDL: expected {text!r}, found {tok.text!r}")

    def at(self, text: str, kind: str = "punct") -> bool:
        tok = self.peek()
        return tok is not None and tok.kind == kind and tok.text == text

    def values(self) -> list[Token]:
        """A data list; ``{…}`` groups (netCDF-4 data with several unlimited dimensions) nest."""
        out = [self._value()]
        while self.at(","):
            self.take()
            out.append(self._value())
        return out

    def _value(self) -> Token:
        if not self.at("{"):
            return self.take()
        self.take()
        items = [] if self.at("}") else self.values()
        self.expect("}")
        return Token("braces", "{", items)


def parse_cdl(text: str) -> tuple[str, Dataset]:
    """(dataset name, model) of a CDL text."""
    p = _Parser(tokenize(text))
    p.expect("netcdf")
    name = p.take().text
    p.expect("{")
    root = Group()
    pending: Pending = []
    _group_body(p, root, "/", [root], pending)
    p.expect("}")
    dataset = Dataset(root)
    _fill_data(dataset, pending)
    stated = _stated(p)
    for var, facts in p.specials:
        _apply_storage(var, facts, stated)
    return name, dataset


#: storage virtual attribute → the model field it states (``_Storage`` alone states chunks and NOFILL:
#: ncdump -s prints ``_Storage`` for every variable and ``_NoFill`` only when it is on)
STATES = {"_Storage": ("chunks", "no_fill"), "_ChunkSizes": ("chunks",), "_NoFill": ("no_fill",),
          "_Endianness": ("endianness",), "_Filter": ("filters",), "_Codecs": ("filters",), "_Shuffle": ("filters",),
          "_DeflateLevel": ("filters",), "_Fletcher32": ("filters",)}
#: HDF5 filter ids in ``_Filter`` → numcodecs id (netcdf-c's plugins; H5Zpublic.h and the HDF Group registry)
HDF5_FILTERS = {1: "zlib", 2: "shuffle", 3: "fletcher32", 4: "szip", 307: "bz2", 32001: "blosc", 32015: "zstd"}


def storage_stated(text: str) -> frozenset[str]:
    """The model storage fields a CDL text states (``ncdump -s`` facts); the rest it says nothing about."""
    p = _Parser(tokenize(text))
    names = {tok.text for tok in p.toks if tok.kind == "name"}
    return frozenset(f for name, fields in STATES.items() if name in names for f in fields)


def _stated(p: _Parser) -> frozenset[str]:
    return frozenset(f for _, facts in p.specials for name in facts for f in STATES.get(name, ()))


def _flag(tokens: list[Token]) -> bool:
    return "".join(t.text for t in tokens).strip().lower() in ("true", "1")


def _apply_storage(var: Variable, facts: dict[str, list[Token]], stated: frozenset[str]) -> None:
    """Set ``var``'s storage fields from its ncdump -s facts (fields the whole text never states stay unknown)."""
    storage = "".join(t.text for t in facts.get("_Storage", [])).strip().lower()
    if "_ChunkSizes" in facts or storage == "chunked":
        var.chunks = [int(t.text) for t in facts.get("_ChunkSizes", [])] or None
    if "no_fill" in stated:
        var.no_fill = _flag(facts.get("_NoFill", []))
    if "_Endianness" in facts:
        var.endianness = "".join(t.text for t in facts["_Endianness"]).strip().lower()
    if "filters" in stated:
        var.filters = _filters(var, facts)


def _filters(var: Variable, facts: dict[str, list[Token]]) -> list[dict[str, Any]]:
    """Codecs in the model's order (shuffle, compressors, fletcher32 last, as NCZarr stores them)."""
    if "_Codecs" in facts:  # the NCZarr codec list itself (ncdump 4.9.1+ on NCZarr)
        codecs = json.loads("".join(t.text for t in facts["_Codecs"]))
        if not isinstance(codecs, list) or not all(isinstance(c, dict) for c in codecs):
            raise FormatError(f"CDL: _Codecs is not a JSON list of codecs: {codecs!r}")
        return codecs
    shuffle = _flag(facts.get("_Shuffle", []))
    fletcher = _flag(facts.get("_Fletcher32", []))
    middle: list[dict[str, Any]] = []
    if "_DeflateLevel" in facts:
        middle.append({"id": "zlib", "level": int(facts["_DeflateLevel"][0].text)})
    for spec in "".join(t.text for t in facts.get("_Filter", [])).split("|"):
        if not spec.strip():
            continue
        fid, *params = (int(x) for x in spec.split(","))
        name = HDF5_FILTERS.get(fid)
        if name == "shuffle":
            shuffle = True
        elif name == "fletcher32":
            fletcher = True
        elif name in ("zlib", "bz2", "zstd"):
            middle.append({"id": name, "level": params[0] if params else 0})
        else:
            middle.append({"id": name or f"hdf5-{fid}", **({"params": params} if params else {})})
    itemsize = 1 if var.type in ("char", "string") else numpy_dtype(var.type).itemsize
    return [*([{"id": "shuffle", "elementsize": itemsize}] if shuffle else []), *middle,
            *([{"id": "fletcher32"}] if fletcher else [])]


Pending = list[tuple[Group, str, str, list[Token]]]


def _group_body(p: _Parser, group: Group, path: str, scope: list[Group], pending: Pending) -> None:
    section = None
    while True:
        tok = p.peek()
        if tok is None or (tok.kind == "punct" and tok.text == "}"):
            return
        if tok.kind == "name" and tok.text in ("dimensions", "variables", "data", "types") and p.at(":", ) is False \
                and p.peek(1) is not None and p.peek(1).text == ":":  # type: ignore[union-attr]
            section = tok.text
            p.take()
            p.take()
            continue
        if tok.kind == "name" and tok.text == "group" and p.peek(1) is not None and p.peek(1).text == ":":  # type: ignore[union-attr]
            p.take()
            p.take()
            gname = p.take().text
            p.expect("{")
            child = Group()
            group.groups[gname] = child
            _group_body(p, child, path.rstrip("/") + "/" + gname, [*scope, child], pending)
            p.expect("}")
            continue
        nxt = p.peek(1)
        if section == "dimensions" and nxt is not None and nxt.text == "=":  # ``:a`` / ``ubyte :a`` are attributes
            dname = p.take().text
            p.expect("=")
            size_tok = p.take()
            if size_tok.text.upper() == "UNLIMITED":
                p.expect(";")
                current = p.take().text if p.peek() is not None and p.peek().kind == "current" else "0"  # type: ignore[union-attr]
                group.dimensions[dname] = Dimension(int(current), True)
            else:
                group.dimensions[dname] = Dimension(int(size_tok.text), False)
                p.expect(";")
        elif section == "data":
            vname = p.take().text
            p.expect("=")
            pending.append((group, path, vname, p.values()))
            p.expect(";")
        else:
            _declaration(p, group, path, scope)


def _declaration(p: _Parser, group: Group, path: str, scope: list[Group]) -> None:
    """A variable (``int v(x) ;``) or an attribute (``v:a = …``, ``string v:a = …``, ``:a = …``)."""
    tok = p.take()
    declared_type = None
    target = ""
    if tok.kind == "punct" and tok.text == ":":
        p.i -= 1
    elif tok.kind == "name" and tok.text in NC_TYPES and not p.at(":"):
        declared_type = tok.text
        if not p.at(":"):
            name = p.take().text
            if not p.at(":"):
                _variable(p, group, path, scope, declared_type, name)
                return
            target = name
    elif tok.kind == "name" and tok.text in NC_TYPES:
        declared_type = tok.text  # typed global attribute: string :a = …
    else:
        target = tok.text
    p.expect(":")
    aname = p.take().text
    p.expect("=")
    values = p.values()
    p.expect(";")
    if aname in VIRTUAL_ATTRIBUTES:
        if aname in STATES and target in group.variables:
            var = group.variables[target]
            if id(var) not in p.seen:
                p.seen[id(var)] = {}
                p.specials.append((var, p.seen[id(var)]))
            p.seen[id(var)][aname] = values
        return
    attr = _attribute(values, declared_type)
    if target:
        if target not in group.variables:
            raise FormatError(f"CDL: attribute {target}:{aname} before variable {target}")
        group.variables[target].attributes[aname] = attr
    else:
        group.attributes[aname] = attr


def _variable(p: _Parser, group: Group, path: str, scope: list[Group], nctype: str, name: str) -> None:
    dims: list[str] = []
    if p.at("("):
        p.take()
        dims.append(p.take().text)
        while p.at(","):
            p.take()
            dims.append(p.take().text)
        p.expect(")")
    p.expect(";")
    fqns, shape = [], []
    for d in dims:
        fqn, dim = _resolve(scope, path, d)
        fqns.append(fqn)
        shape.append(dim.size)
    group.variables[name] = Variable(nctype, fqns, tuple(shape), {})


def _resolve(scope: list[Group], path: str, name: str) -> tuple[str, Dimension]:
    segments = [s for s in path.split("/") if s]
    for depth in range(len(scope) - 1, -1, -1):
        if name in scope[depth].dimensions:
            prefix = "/" + "/".join(segments[:depth])
            return prefix.rstrip("/") + "/" + name, scope[depth].dimensions[name]
    raise FormatError(f"CDL: dimension {name!r} is not defined in scope of {path}")


def _attribute(values: list[Token], declared_type: str | None) -> Attribute:
    if declared_type == "string":
        return Attribute("string", np.array([v.text for v in values], dtype=object))
    if all(v.kind == "string" for v in values):
        return Attribute("char", "".join(v.text for v in values))
    parsed = [_number(v.text) for v in values]
    nctype = declared_type or next((t for _, t in parsed if t), None) or "int"
    return Attribute(nctype, np.array([v for v, _ in parsed], dtype=numpy_dtype(nctype)))


def _fill_data(dataset: Dataset, pending: Pending) -> None:
    written: set[int] = set()
    dims = {f"{path.rstrip('/')}/{name}": dim for path, group in dataset.root.walk()
            for name, dim in group.dimensions.items()}
    for group, _path, vname, values in pending:
        var = group.variables.get(vname)
        if var is None:
            raise FormatError(f"CDL: data for undeclared variable {vname}")
        braced = [k for k, d in enumerate(var.dimensions) if k > 0 and d in dims and dims[d].unlimited]
        var.data = _values(var, _unbrace(var, vname, braced, values, 0))
        written.add(id(var))
    for _, group in dataset.root.walk():
        for var in group.variables.values():
            if id(var) not in written:
                var.data = _values(var, [])


def _unbrace(var: Variable, name: str, braced: list[int], tokens: list[Token], depth: int) -> list[Token]:
    """Flatten ``{…}`` groups as ncgen reads them: the group at depth d holds the values of the dimensions
    from the d-th unlimited one after the first dimension on, one index of those before; a short
    group is padded with fill (char: NUL bytes)."""
    out: list[Token] = []
    for tok in tokens:
        if tok.kind != "braces":
            out.append(tok)
            continue
        if depth >= len(braced):
            raise FormatError(f"CDL: data of {name}: more {{…}} levels than unlimited dimensions after the first")
        size = math.prod(var.shape[braced[depth]:])
        inner = _unbrace(var, name, braced, tok.items or [], depth + 1)
        if var.type == "char":
            raw = b"".join(b"" if t.kind == "fill" else _char_bytes(t.text) for t in inner)[:size]
            out.append(Token("string", (raw + bytes(size - len(raw))).decode("latin-1")))
        else:
            out += inner[:size] + [Token("fill", "_")] * (size - len(inner))
    return out


def _char_bytes(text: str) -> bytes:
    """ncdump writes char bytes >= 0x80 as octal escapes, which parse to U+0080..U+00FF."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")


def _fill_of(var: Variable) -> Any:
    fill = var.fill_value
    if fill is None:
        fill = DEFAULT_FILL[var.type]
        if var.type == "char":
            fill = char_fill_byte(str(fill))
    return fill


def _values(var: Variable, tokens: list[Token]) -> np.ndarray:
    n = math.prod(var.shape)
    fill = _fill_of(var)
    if var.type == "char":
        last = var.shape[-1] if var.shape else 1
        buf = bytearray()
        for tok in tokens:
            raw = b"" if tok.kind == "fill" else _char_bytes(tok.text)
            if len(var.shape) >= 2 and last:
                pad = (-len(raw)) % last if raw else last
                raw += bytes(pad)
            buf += raw
        buf = buf[:n] + bytes(max(0, n - len(buf)))
        return np.frombuffer(bytes(buf), dtype="S1").reshape(var.shape).copy()
    if var.type == "string":
        items: list[Any] = [(fill if t.kind == "fill" else t.text) for t in tokens]  # ncdump prints `_` for the fill
        items += [fill] * (n - len(items))
        arr = np.empty(n, dtype=object)
        arr[:] = items[:n]
        return arr.reshape(var.shape)
    dtype = numpy_dtype(var.type)
    floating = var.type in ("float", "double")
    items = [fill if t.kind == "fill" else (_float(t.text) if floating else _number(t.text)[0]) for t in tokens]
    items += [fill] * (n - len(items))
    return np.array(items[:n], dtype=dtype).reshape(var.shape)
