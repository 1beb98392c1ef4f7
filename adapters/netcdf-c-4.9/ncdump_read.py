#!/usr/bin/env python3
"""Debian's netcdf-c 4.9.0 as a conformance reader: ``ncdump -p 9,17 URL`` (the /usr/bin tool, 4.9.0's own
NCZarr code reads the store), its CDL text turned into the canonical model JSON (docs/contracts/model.md) on
stdout.

Standalone on purpose (the standard library only, nothing of nczarr_conformance): what is graded is what
netcdf-c 4.9.0 reads, not our code. This script only transcribes ncdump's text; it decides nothing about
the store.

Why ncdump's CDL and not ``nccopy -k nc4 URL x.nc`` read back with netCDF4-python:

- nccopy 4.9.0 exits 1 ("NetCDF: Invalid argument") on every NCZarr char variable, even one ncgen 4.9.0
  wrote (tests/peers/test_netcdf_c_490.py ``test_known_deviation_490_nccopy_char``), where ncdump reads the
  4.8-4.9.0 layout's ``<U1`` char right: the char-var cells of that layout would turn from pass to fails, a
  fault of nccopy's copy and not of 4.9.0's reading.
- the .nc file would be read by netCDF4-python's own libnetcdf (4.10.1), a second netcdf-c in the path;
  ncdump's text is 4.9.0's reading and nothing else.
- CDL loses nothing the model holds: each attribute's type is spelled (suffixes ``b s ub us u ll ull f``, or
  ``string``), char text and escapes are exact, ``-p 9,17`` prints every float and double so that it reads
  back to the same value, ``_`` marks a fill value, and ncdump without ``-s`` prints no storage attributes
  (``_NCProperties``, ``_Storage``): storage is not graded (the matrix compares without it).
- a crash stays a crash: ncdump 4.9.0 is killed by SIGSEGV on NCZarr scalars, ``>S1`` char and strings;
  the exit is reported, as the matrix graded it before this adapter (``ncdump exit -11: killed by signal 11``).

Each CDL rule below follows what ncdump prints and ncgen reads (netcdf-c's docs/CDL and ncdump/ncgen):
a group's dimensions (``UNLIMITED ; // (N currently)``), typed attributes, nested ``group: g { … }``, and a
data section where char text fills a row padded with NULs, ``{…}`` nests the values of variables with
several unlimited dimensions, and a missing tail is fill.

Usage: ``ncdump_read.py URL`` (a netcdf-c URL, ``file:///store#mode=nczarr,file``, or a path);
``ncdump_read.py --version`` prints the netcdf-c version ncdump reports. Exit 1 with one line on stderr,
its last, when ncdump fails or its text cannot be read.
"""
from __future__ import annotations

import json
import math
import re
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

NUMERIC = {"byte": "i1", "ubyte": "u1", "short": "i2", "ushort": "u2", "int": "i4", "uint": "u4", "int64": "i8",
           "uint64": "u8", "float": "f4", "double": "f8"}
TYPES = (*NUMERIC, "char", "string")
#: netcdf.h NC_FILL_*: what ``_`` stands for when a variable has no _FillValue (float: the float32 value)
DEFAULT_FILL: dict[str, Any] = {"byte": -127, "ubyte": 255, "short": -32767, "ushort": 65535, "int": -2147483647,
                                "uint": 4294967295, "int64": -9223372036854775806, "uint64": 18446744073709551614,
                                "float": 9.969209968386869e36, "double": 9.969209968386869e36, "string": ""}
#: ncgen's suffixes of numeric constants (the longest that matches is the type)
SUFFIXES = [("ull", "uint64"), ("ub", "ubyte"), ("us", "ushort"), ("ll", "int64"), ("u", "uint"), ("b", "byte"),
            ("s", "short"), ("l", "int"), ("f", "float"), ("d", "double")]
SPECIAL = {"nan": math.nan, "nanf": math.nan, "infinity": math.inf, "infinityf": math.inf,
           "-infinity": -math.inf, "-infinityf": -math.inf, "+infinity": math.inf, "+infinityf": math.inf}
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a", "\\": "\\", '"': '"',
           "'": "'", "?": "?"}
#: CDL's virtual attributes: storage settings (ncdump -s, ncgen), never attributes of the data
VIRTUAL = frozenset({"_Storage", "_ChunkSizes", "_Format", "_NoFill", "_Endianness", "_DeflateLevel", "_Shuffle",
                     "_Fletcher32", "_Filter", "_Codecs", "_NCProperties", "_IsNetcdf4", "_SuperblockVersion",
                     "_Quantize"})
PUNCT = set("{}(),;:=")
CURRENT = re.compile(r"//\s*\((\d+) currently\)")


class CDLError(Exception):
    """The text is not CDL as ncdump prints it."""


@dataclass
class Token:
    kind: str  # name | string | punct | current | fill | braces
    text: str
    items: list[Token] = field(default_factory=list)  # a braces token's values


def _quoted(text: str, i: int, quote: str) -> tuple[int, str]:
    """The string starting after its opening quote at ``i``: C escapes, octal (ncdump's bytes >= 0x80) and hex."""
    out: list[str] = []
    while i < len(text):
        c = text[i]
        if c == quote:
            return i + 1, "".join(out)
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            octal = re.match(r"[0-7]{1,3}", text[i + 1:])
            hexa = re.match(r"[0-9a-fA-F]{1,2}", text[i + 2:]) if nxt == "x" else None
            if octal:
                out.append(chr(int(octal.group(0), 8)))
                i += 1 + len(octal.group(0))
            elif hexa:
                out.append(chr(int(hexa.group(0), 16)))
                i += 2 + len(hexa.group(0))
            else:
                out.append(ESCAPES.get(nxt, nxt))
                i += 2
            continue
        out.append(c)
        i += 1
    raise CDLError("CDL: unterminated string")


def tokenize(text: str) -> list[Token]:
    """Words, strings and punctuation; comments dropped but ``// (N currently)`` (an unlimited size)."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            current = CURRENT.match(text[i:end])
            if current:
                tokens.append(Token("current", current.group(1)))
            i = end
        elif c in "\"'":
            i, value = _quoted(text, i + 1, c)
            tokens.append(Token("string", value))
        elif c in PUNCT:
            tokens.append(Token("punct", c))
            i += 1
        else:
            word: list[str] = []
            while i < n and not text[i].isspace() and text[i] not in PUNCT and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:  # an escaped character in a name
                    word.append(text[i + 1])
                    i += 2
                    continue
                word.append(text[i])
                i += 1
            joined = "".join(word)
            tokens.append(Token("fill" if joined == "_" else "name", joined))
    return tokens


def number(word: str) -> tuple[int | float, str | None]:
    """(value, the type its suffix names, or None) of a numeric constant."""
    low = word.lower()
    if low in SPECIAL:
        return SPECIAL[low], "float" if low.endswith("f") else "double"
    for suffix, nctype in SUFFIXES:
        body = low[: -len(suffix)]
        if low.endswith(suffix) and body and not low.startswith("0x"):
            if nctype in ("float", "double"):
                return float(body), nctype
            if re.fullmatch(r"[-+]?\d+", body):
                return int(body), nctype
    if re.fullmatch(r"[-+]?\d+", low):
        return int(low), None
    try:
        return float(low), "double"
    except ValueError:
        raise CDLError(f"CDL: {word!r} is not a number") from None


def floating(word: str) -> float:
    """A float or double datum, the sign of zero kept (ncdump prints -0.0 as ``-0``)."""
    value, _ = number(word)
    if word.lower() in SPECIAL or not isinstance(value, int):
        return float(value)
    return float(word.rstrip("fFdD"))


def json_number(value: int | float) -> int | float | str:
    """A value as the model spells it: NaN and the infinities as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def float32(value: float) -> float:
    """``value`` rounded to the nearest float32, as a Python float (beyond float32's range: an infinity, as a C
    cast gives)."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def at_precision(value: int | float | str, nctype: str) -> float | str:
    """A float or double as the model spells it: the shortest decimal that reads back to the same value at the
    type's own precision (a float32 0.1 is ``0.1``), NaN and the infinities as strings."""
    value = float(value)  # "NaN" and "Infinity" (a _FillValue already spelled) read back too
    if not math.isfinite(value):
        return json_number(value)
    if nctype != "float":
        return value  # repr of a double is already the shortest
    single = float32(value)
    if math.isinf(single):
        return json_number(single)
    for digits in range(1, 10):
        shortest = float(f"{single:.{digits}g}")
        if float32(shortest) == single:
            return shortest
    return single


def integer_in_range(value: int | float, nctype: str, where: str) -> int:
    """An integer datum or attribute value of ``nctype``, refused (not wrapped) outside the type's range."""
    code = NUMERIC[nctype]
    bits = int(code[1]) * 8
    low, high = (0, 2**bits - 1) if code[0] == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if isinstance(value, float) or not low <= value <= high:
        raise CDLError(f"CDL: {where}: {value!r} is not a {nctype}")
    return value


@dataclass
class Variable:
    type: str
    dimensions: list[str]
    shape: list[int]
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: list[Token] | None = None  # the data section's values, when it has any


@dataclass
class Group:
    dimensions: dict[str, dict[str, Any]] = field(default_factory=dict)
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)
    variables: dict[str, Variable] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)


class Parser:
    """ncdump's CDL into groups; the data values are kept as tokens until every dimension is known."""

    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0

    def peek(self, k: int = 0) -> Token | None:
        return self.tokens[self.i + k] if self.i + k < len(self.tokens) else None

    def take(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise CDLError("CDL: unexpected end of text")
        self.i += 1
        return tok

    def at(self, text: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok is not None and tok.kind in ("punct", "name") and tok.text == text

    def expect(self, text: str) -> None:
        tok = self.take()
        if tok.text != text or tok.kind not in ("punct", "name"):
            raise CDLError(f"CDL: expected {text!r}, found {tok.text!r}")

    def values(self) -> list[Token]:
        """A comma-separated list; ``{…}`` nests (data of variables with several unlimited dimensions)."""
        out = [self.value()]
        while self.at(","):
            self.take()
            out.append(self.value())
        return out

    def value(self) -> Token:
        if not self.at("{"):
            return self.take()
        self.take()
        items = [] if self.at("}") else self.values()
        self.expect("}")
        return Token("braces", "{", items)

    def dataset(self) -> Group:
        self.expect("netcdf")
        self.take()  # the dataset's name
        self.expect("{")
        root = Group()
        self.group_body(root, "/", [root])
        self.expect("}")
        return root

    def group_body(self, group: Group, path: str, scope: list[Group]) -> None:
        section = None
        while True:
            tok = self.peek()
            if tok is None or (tok.kind == "punct" and tok.text == "}"):
                return
            if tok.kind == "name" and tok.text in ("dimensions", "variables", "data", "types") and self.at(":", 1):
                section = self.take().text
                self.take()
            elif tok.kind == "name" and tok.text == "group" and self.at(":", 1):
                self.take()
                self.take()
                name = self.take().text
                self.expect("{")
                child = group.groups[name] = Group()
                self.group_body(child, f"{path.rstrip('/')}/{name}", [*scope, child])
                self.expect("}")
            elif section == "dimensions" and self.at("=", 1):
                self.dimension(group)
            elif section == "data":
                name = self.take().text
                self.expect("=")
                if name not in group.variables:
                    raise CDLError(f"CDL: data for undeclared variable {name}")
                group.variables[name].tokens = self.values()
                self.expect(";")
            else:
                self.declaration(group, path, scope)

    def dimension(self, group: Group) -> None:
        name = self.take().text
        self.expect("=")
        size = self.take().text
        self.expect(";")
        if size.upper() == "UNLIMITED":
            current = self.take().text if (self.peek() or Token("", "")).kind == "current" else "0"
            group.dimensions[name] = {"size": int(current), "unlimited": True}
        else:
            group.dimensions[name] = {"size": int(size), "unlimited": False}

    def declaration(self, group: Group, path: str, scope: list[Group]) -> None:
        """A variable (``int v(x) ;``) or an attribute (``v:a = …``, ``string v:a = …``, ``:a = …``)."""
        tok = self.take()
        declared = None
        target = ""
        if tok.kind == "punct" and tok.text == ":":
            self.i -= 1
        elif tok.kind == "name" and tok.text in TYPES and not self.at(":"):
            declared = tok.text
            name = self.take().text
            if not self.at(":"):
                self.variable(group, path, scope, declared, name)
                return
            target = name
        elif tok.kind == "name" and tok.text in TYPES:
            declared = tok.text  # a typed group attribute: string :a = …
        else:
            target = tok.text
        self.expect(":")
        name = self.take().text
        self.expect("=")
        values = self.values()
        self.expect(";")
        if name in VIRTUAL:
            return
        attribute = make_attribute(values, declared, f"{path.rstrip('/')}/{target}:{name}")
        if not target:
            group.attributes[name] = attribute
        elif target in group.variables:
            group.variables[target].attributes[name] = attribute
        else:
            raise CDLError(f"CDL: attribute {target}:{name} before variable {target}")

    def variable(self, group: Group, path: str, scope: list[Group], nctype: str, name: str) -> None:
        names: list[str] = []
        if self.at("("):
            self.take()
            names.append(self.take().text)
            while self.at(","):
                self.take()
                names.append(self.take().text)
            self.expect(")")
        self.expect(";")
        full, shape = [], []
        for dim in names:
            fqn, size = resolve(scope, path, dim)
            full.append(fqn)
            shape.append(size)
        group.variables[name] = Variable(nctype, full, shape)


def resolve(scope: list[Group], path: str, name: str) -> tuple[str, int]:
    """A dimension by name: the innermost group that defines it, as CDL scoping says; (full name, size)."""
    parts = [p for p in path.split("/") if p]
    for depth in range(len(scope) - 1, -1, -1):
        if name in scope[depth].dimensions:
            prefix = "/" + "/".join(parts[:depth])
            return f"{prefix.rstrip('/')}/{name}", int(scope[depth].dimensions[name]["size"])
    raise CDLError(f"CDL: dimension {name!r} is not defined in scope of {path}")


def make_attribute(values: list[Token], declared: str | None, where: str) -> dict[str, Any]:
    """An attribute: ``string`` when declared so, char when every value is text, else the suffix's type."""
    if declared == "string":
        return {"type": "string", "value": [v.text for v in values]}
    if all(v.kind == "string" for v in values):
        return {"type": "char", "value": "".join(v.text for v in values)}
    parsed = [number(v.text) for v in values]
    nctype = declared or next((t for _, t in parsed if t), None) or "int"
    if nctype in ("float", "double"):
        return {"type": nctype, "value": [at_precision(v, nctype) for v, _ in parsed]}
    return {"type": nctype, "value": [integer_in_range(v, nctype, where) for v, _ in parsed]}


# ---- the data section ------------------------------------------------------------------------------------

def unbrace(var: Variable, where: str, braced: list[int], tokens: list[Token], depth: int) -> list[Token]:
    """Flatten ``{…}`` groups as ncgen reads them: the group at depth d holds the values of the dimensions from
    the d-th unlimited one after the first dimension on, one index of those before; a short group is padded
    with fill (char: NUL bytes)."""
    out: list[Token] = []
    for tok in tokens:
        if tok.kind != "braces":
            out.append(tok)
            continue
        if depth >= len(braced):
            raise CDLError(f"CDL: data of {where}: more {{…}} levels than unlimited dimensions after the first")
        size = math.prod(var.shape[braced[depth]:])
        inner = unbrace(var, where, braced, tok.items, depth + 1)
        if var.type == "char":
            raw = b"".join(b"" if t.kind == "fill" else char_bytes(t.text) for t in inner)[:size]
            out.append(Token("string", (raw + bytes(size - len(raw))).decode("latin-1")))
        else:
            out += inner[:size] + [Token("fill", "_")] * (size - len(inner))
    return out


def char_bytes(text: str) -> bytes:
    """ncdump prints char bytes >= 0x80 as octal escapes (read as U+0080..U+00FF): back to those bytes."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")


def fill_of(var: Variable, where: str) -> Any:
    """What ``_`` and a missing tail stand for: the _FillValue, else netCDF's default fill."""
    attribute = var.attributes.get("_FillValue")
    if attribute is None:
        return DEFAULT_FILL[var.type]
    if attribute["type"] == "char" or not attribute["value"]:
        raise CDLError(f"CDL: {where}: a _FillValue of type {attribute['type']} for a {var.type} variable")
    return attribute["value"][0]


def nest(flat: list[Any], shape: list[int]) -> Any:
    """Row-major nested lists; a scalar's one value bare."""
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = math.prod(shape[1:])
    return [nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def char_data(var: Variable, tokens: list[Token]) -> list[str]:
    """Each text fills whole rows (the last dimension), NUL-padded; ``_`` is a row of NULs."""
    n = math.prod(var.shape)
    last = var.shape[-1] if var.shape else 1
    buf = bytearray()
    for tok in tokens:
        raw = b"" if tok.kind == "fill" else char_bytes(tok.text)
        if len(var.shape) >= 2 and last:
            raw += bytes((-len(raw)) % last if raw else last)
        buf += raw
    buf = buf[:n] + bytes(max(0, n - len(buf)))
    return [bytes([b]).decode("latin-1") for b in buf]


def data(var: Variable, where: str, dims: dict[str, dict[str, Any]]) -> Any:
    """The variable's values, row-major, as the model spells them."""
    braced = [k for k, d in enumerate(var.dimensions) if k > 0 and d in dims and dims[d]["unlimited"]]
    tokens = unbrace(var, where, braced, var.tokens or [], 0)
    n = math.prod(var.shape)
    if var.type == "char":
        return nest(char_data(var, tokens), var.shape)
    fill = fill_of(var, where)
    if var.type == "string":
        items: list[Any] = [fill if t.kind == "fill" else t.text for t in tokens]
    elif var.type in ("float", "double"):
        items = [fill if t.kind == "fill" else floating(t.text) for t in tokens]
    else:
        items = [fill if t.kind == "fill" else integer_in_range(number(t.text)[0], var.type, where) for t in tokens]
    items = (items + [fill] * n)[:n]  # a short list: the rest is fill
    if var.type in ("float", "double"):
        items = [at_precision(v, var.type) for v in items]
    return nest(items, var.shape)


def to_json(group: Group, path: str, dims: dict[str, dict[str, Any]]) -> dict[str, Any]:
    variables = {}
    for name, var in group.variables.items():
        where = f"{path.rstrip('/')}/{name}"
        variables[name] = {"type": var.type, "dimensions": var.dimensions, "shape": var.shape,
                           "attributes": var.attributes, "data": data(var, where, dims)}
    return {"dimensions": group.dimensions, "attributes": group.attributes, "variables": variables,
            "groups": {name: to_json(child, f"{path.rstrip('/')}/{name}", dims)
                       for name, child in group.groups.items()}}


def all_dimensions(group: Group, path: str) -> dict[str, dict[str, Any]]:
    """Every dimension by full name."""
    out = {f"{path.rstrip('/')}/{name}": dim for name, dim in group.dimensions.items()}
    for name, child in group.groups.items():
        out.update(all_dimensions(child, f"{path.rstrip('/')}/{name}"))
    return out


def model(cdl: str) -> dict[str, Any]:
    """The canonical model of ncdump's text."""
    root = Parser(cdl).dataset()
    return {"model": "nczarr-model/1", "root": to_json(root, "/", all_dimensions(root, "/"))}


# ---- running ncdump --------------------------------------------------------------------------------------

def version() -> str:
    """The netcdf-c version ncdump's usage text ends with (``netcdf library version 4.9.0 of …``)."""
    said = subprocess.run(["ncdump"], check=False, capture_output=True, text=True, timeout=60).stderr
    for word in said.split():
        if word[:1].isdigit() and word.count(".") >= 2:
            return word.rstrip(")")
    return "unknown"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: ncdump_read.py URL | --version", file=sys.stderr)
        return 2
    if argv[1] == "--version":
        print(version())
        return 0
    url = argv[1] if "#" in argv[1] else f"file://{argv[1]}#mode=nczarr,file"
    done = subprocess.run(["ncdump", "-p", "9,17", url], check=False, capture_output=True, timeout=600)
    said = done.stderr.decode("utf-8", "replace")
    if done.returncode != 0:
        lines = said.strip().splitlines()
        reason = lines[0] if lines else (f"killed by signal {-done.returncode}" if done.returncode < 0 else "")
        sys.stderr.write(said if said.endswith("\n") or not said else said + "\n")
        print(f"ncdump exit {done.returncode}: {reason or 'no message'}", file=sys.stderr)
        return 1
    try:
        doc = model(done.stdout.decode("utf-8", "surrogateescape"))
    except (CDLError, ValueError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    json.dump(doc, sys.stdout)  # ASCII escapes: a name or text ncdump printed as bytes that are not UTF-8 survives
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
