"""The small text rules of ncdump 4.9.0: names, string escapes and number formats.

Each function mirrors one routine of netcdf-c's ``ncdump`` (named in its
docstring) so that our CDL is byte-for-byte what users get from ncdump and what
``ncgen`` reads back. Text is a ``str`` whose undecodable bytes are carried as
surrogates (``surrogateescape``); the CLI writes it back as the original bytes.
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

#: ASCII characters escaped with a backslash in names (utils.c ``escaped_name``).
NAME_SPECIALS = frozenset(" !\"#$&'()*,:;<=>?[]\\^`{|}~")
#: Variable names after which ncdump puts a space before ``:`` (ncdump.c ``keywords``).
KEYWORDS = frozenset({"variables", "dimensions", "data", "group", "types"})
ATT_SUFFIX = {"byte": "b", "short": "s", "int": "", "ubyte": "UB", "ushort": "US", "uint": "U",
              "int64": "LL", "uint64": "ULL"}
_COMMON_ESCAPES = {0x08: "\\b", 0x0C: "\\f", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v", 0x5C: "\\\\",
                   0x27: "\\'", 0x22: '\\"'}


def to_bytes(text: str) -> bytes:
    """The bytes netcdf-c holds for a model string (UTF-8; surrogates are raw bytes)."""
    return text.encode("utf-8", "surrogateescape")


def from_bytes(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def byte_len(text: str) -> int:
    """``strlen`` of the text ncdump would print (line wrapping counts bytes)."""
    return len(to_bytes(text))


def escape_name(name: str) -> str:
    """utils.c ``escaped_name``: backslash before CDL specials and a leading digit, ``\\%xx`` for controls."""
    out = ["\\"] if name[:1].isdigit() and name[0].isascii() else []
    for ch in name:
        code = ord(ch)
        if code < 0x80 and (code < 0x20 or code == 0x7F):
            out.append(f"\\%{code:02x}")
        elif ch in NAME_SPECIALS:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _is_cntrl(code: int) -> bool:
    return code < 0x20 or code == 0x7F


def attribute_string(raw: bytes) -> str:
    """ncdump.c ``pr_att_string`` for a netCDF-4 file: trailing NULs dropped, controls in octal."""
    raw = raw.rstrip(b"\x00")
    return '"' + _join_bytes(raw, _escape_pieces(raw, newlines=(0x0A,))) + '"'


def _escape_pieces(raw: bytes, *, newlines: tuple[int, ...]) -> list[str | None]:
    """ncdump's escapes of text: ``newlines`` as ``\\n``, the common C escapes, other controls in
    octal; ``None`` for a byte >= 0x80, copied verbatim by :func:`_join_bytes`."""
    out: list[str | None] = []
    for code in raw:
        if code in newlines:
            out.append("\\n")
        elif code in _COMMON_ESCAPES:
            out.append(_COMMON_ESCAPES[code])
        elif _is_cntrl(code):
            out.append(f"\\{code:03o}")
        else:
            out.append(chr(code) if code < 0x80 else None)
    return out


def _join_bytes(raw: bytes, pieces: list[str | None]) -> str:
    """Join escape pieces; ``None`` marks a byte >= 0x80 copied verbatim (UTF-8 stays whole)."""
    buf = bytearray()
    for code, piece in zip(raw, pieces):
        if piece is None:
            buf.append(code)
        else:
            buf.extend(piece.encode("ascii"))
    return from_bytes(bytes(buf))


def char_data_string(raw: bytes) -> str:
    """vardata.c ``pr_tvals``: one row of char data; non-printable bytes (all >= 0x80) in octal."""
    raw = raw.rstrip(b"\x00")
    out = ['"']
    for code in raw:
        if code == 0x0A:
            out.append('\\n",\n    "')
        elif code in _COMMON_ESCAPES:
            out.append(_COMMON_ESCAPES[code])
        elif 0x20 <= code < 0x7F:
            out.append(chr(code))
        else:
            out.append(f"\\{code:03o}")
    out.append('"')
    return "".join(out)


def string_data(value: str) -> str:
    """dumplib.c ``ncstring_typ_tostring``: controls in octal, ``\\v`` printed as ``\\n`` (as ncdump does)."""
    raw = to_bytes(value).split(b"\x00", 1)[0]
    return '"' + _join_bytes(raw, _escape_pieces(raw, newlines=(0x0A, 0x0B))) + '"'


def tztrim(text: str) -> str:
    """ncdump.c ``tztrim``: drop trailing zeros after the decimal point, keep the point and any suffix."""
    m = re.match(r"^(-?[0-9.]*)(.*)$", text, re.S)
    assert m is not None
    mantissa, rest = m.groups()
    if mantissa.endswith(".") or "." not in mantissa:
        return text
    return mantissa.rstrip("0") + rest


def float_attribute(value: float, nctype: str, float_digits: int, double_digits: int) -> str:
    """ncdump.c ``pr_att_valgs`` for float/double: ``%#.Ng`` (+``f``), trailing zeros trimmed."""
    suffix = "f" if nctype == "float" else ""
    if math.isnan(value):
        return "NaN" + suffix
    if math.isinf(value):
        return ("-" if value < 0 else "") + "Infinity" + suffix
    digits = float_digits if nctype == "float" else double_digits
    return tztrim(f"%#.{digits}g" % value + suffix)


def attribute_values(nctype: str, value: Any, float_digits: int, double_digits: int) -> str:
    """The right-hand side of an attribute line."""
    if nctype == "char":
        return attribute_string(to_bytes(value))
    if nctype == "string":
        return ", ".join(attribute_string(to_bytes(str(v))) for v in value.tolist())
    if nctype in ("float", "double"):
        return ", ".join(float_attribute(float(v), nctype, float_digits, double_digits) for v in value.tolist())
    return ", ".join(f"{int(v)}{ATT_SUFFIX[nctype]}" for v in value.tolist())


class ValueFormatter:
    """dumplib.c ``*_val_tostring`` and ``*_val_equals``: data values as text, fill as ``_``."""

    def __init__(self, nctype: str, fill: Any, fmt: str | None, float_digits: int, double_digits: int) -> None:
        self.nctype = nctype
        self.fill = fill
        if fmt is None:
            fmt = {"float": f"%.{float_digits}g", "double": f"%.{double_digits}g"}.get(nctype, "%d")
        self.fmt = _python_format(fmt)
        self.eps = np.finfo(np.float32 if nctype == "float" else np.float64).eps if nctype in ("float", "double") \
            else None

    def fill_mask(self, row: np.ndarray) -> np.ndarray:
        """Which values equal the fill (floats within machine epsilon, NaN and Inf by kind)."""
        if self.fill is None:
            return np.zeros(row.shape, dtype=bool)
        if self.nctype == "string":
            return np.array([v == self.fill for v in row.tolist()], dtype=bool)
        if self.eps is None:
            return np.asarray(row == self.fill)
        v1, v2 = row, row.dtype.type(self.fill)
        with np.errstate(all="ignore"):
            close = np.abs(v1 - v2) <= np.abs(v2 * row.dtype.type(self.eps))
        same_side = (v1 > 0) == (v2 > 0)
        finite = np.isfinite(v1) & np.isfinite(v2)
        special = (np.isnan(v1) & np.isnan(v2)) | (np.isinf(v1) & np.isinf(v2))
        return np.asarray(same_side & np.where(finite, close, special))

    def texts(self, row: np.ndarray) -> list[str]:
        mask = self.fill_mask(row).tolist()
        return ["_" if m else self.text(v) for v, m in zip(row.tolist(), mask)]

    def text(self, value: Any) -> str:
        if self.nctype == "string":
            return string_data(value if isinstance(value, str) else from_bytes(value or b""))
        if self.nctype in ("float", "double"):
            x = float(value)
            if math.isnan(x):
                return "NaNf" if self.nctype == "float" else "NaN"
            if math.isinf(x):
                return ("-" if x < 0 else "") + ("Infinityf" if self.nctype == "float" else "Infinity")
            return self.fmt % x
        return self.fmt % int(value)


def _python_format(fmt: str) -> str:
    """A C printf format for Python's % operator (length modifiers such as ``l``/``ll`` dropped)."""
    return re.sub(r"(%[-+ #0-9.]*)(hh|h|ll|l|L|q|j|z|t)?([diouxXeEfFgGcs])", r"\1\3", fmt)
