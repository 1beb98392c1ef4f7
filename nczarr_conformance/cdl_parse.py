"""CDL text as ``ncdump`` prints it → canonical model.

Used to read through netcdf-c 4.9.0's ``ncdump`` (the conformance matrix) and to
turn netcdf-c's ``ref_*.cdl`` baselines into models. It covers what ncdump
emits for the netCDF-4 atomic types: dimensions (``UNLIMITED ; // (N currently)``),
typed variable and group attributes with ncgen's suffixes, nested groups, and
the data section with ``_`` for fill.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import FormatError
from .model import Attribute, Dataset, Dimension, Group, Variable, char_fill_byte
from .nczarr.dtypes import DEFAULT_FILL, NC_TYPES, numpy_dtype

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
    kind: str  # "name", "string", "punct", "current", "fill"
    text: str


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
        out = [self.take()]
        while self.at(","):
            self.take()
            out.append(self.take())
        return out


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
    return name, dataset


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
        if section == "dimensions":
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
    for group, _path, vname, values in pending:
        var = group.variables.get(vname)
        if var is None:
            raise FormatError(f"CDL: data for undeclared variable {vname}")
        var.data = _values(var, values)
        written.add(id(var))
    for _, group in dataset.root.walk():
        for var in group.variables.values():
            if id(var) not in written:
                var.data = _values(var, [])


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
