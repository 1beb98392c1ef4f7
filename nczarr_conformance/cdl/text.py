"""The small text rules of ncdump 4.9.0 for data: char rows, value formats and the fill's ``_``.

Each function mirrors one routine of netcdf-c's ``ncdump`` (named in its
docstring) so that our CDL is byte-for-byte what users get from ncdump and what
``ncgen`` reads back. The rules a header needs (names, attribute values) live in
cdl/header_text.py, which imports no numpy; they are re-exported here. Text is a
``str`` whose undecodable bytes are carried as surrogates (``surrogateescape``);
the CLI writes it back as the original bytes.
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from nczarr_conformance.cdl.bulk import (
    Items,
    Specials,
    format_d,
    format_g,
    g_precision_supported,
)
from nczarr_conformance.cdl.header_text import (
    ATT_SUFFIX,
    COMMON_ESCAPES,
    KEYWORDS,
    NAME_SPECIALS,
    attribute_string,
    attribute_values,
    byte_len,
    escape_name,
    float_attribute,
    from_bytes,
    string_data,
    to_bytes,
    tztrim,
)

__all__ = ["ATT_SUFFIX", "KEYWORDS", "NAME_SPECIALS", "PRIM_LEN", "ValueFormatter", "attribute_string",
           "attribute_values", "byte_len", "char_data_string", "escape_name", "float_attribute", "from_bytes",
           "prim_text", "string_data", "to_bytes", "tztrim"]

PRIM_LEN = 100  # dumplib.c: the buffer one value is formatted into


def _char_data_table() -> list[str]:
    """vardata.c ``pr_tvals``'s escape of each byte: a newline also ends the line (and the string)."""
    table = []
    for code in range(256):
        if code == 0x0A:
            table.append('\\n",\n    "')
        elif code in COMMON_ESCAPES:
            table.append(COMMON_ESCAPES[code])
        elif 0x20 <= code < 0x7F:
            table.append(chr(code))
        else:
            table.append(f"\\{code:03o}")
    return table


_CHAR_DATA = _char_data_table()


def char_data_string(raw: bytes) -> str:
    """vardata.c ``pr_tvals``: one row of char data; non-printable bytes (all >= 0x80) in octal."""
    return '"' + raw.rstrip(b"\x00").decode("latin-1").translate(_CHAR_DATA) + '"'


def prim_text(text: str) -> str:
    """dumplib.c's ``snprintf(sout, PRIM_LEN, fmt, v)``: a value's text is cut to 99 bytes (a
    ``C_format`` such as ``%.3f`` writes 300 digits for 1e300)."""
    if len(text) < PRIM_LEN // 4:  # cannot be over 99 bytes, even all 4-byte characters
        return text
    raw = to_bytes(text)
    return text if len(raw) < PRIM_LEN else from_bytes(raw[:PRIM_LEN - 1])


class ValueFormatter:
    """dumplib.c ``*_val_tostring`` and ``*_val_equals``: data values as text, fill as ``_``."""

    def __init__(self, nctype: str, fill: Any, fmt: str | None, float_digits: int, double_digits: int) -> None:
        self.nctype = nctype
        self.fill = fill
        self.custom = fmt is not None  # a C_format: its texts may need cutting to ncdump's buffer
        self.digits = float_digits if nctype == "float" else double_digits
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

    def items(self, values: np.ndarray) -> Items:
        """The batch's texts, fill as ``_``.

        ``%d`` and ``%.Ng`` (ncdump's own formats) are formatted by numpy (cdl/bulk.py) and the
        values it cannot round with certainty by Python's ``%``; ``C_format``s and strings by
        :meth:`texts`.
        """
        flat = np.asarray(values).reshape(-1)
        if self.custom or self.nctype in ("string", "char") or (
                self.eps is not None and not g_precision_supported(self.digits)):
            return Items.of_texts(self.texts(flat), ascii_only=self.nctype != "string" and self.fmt.isascii())
        fill = (self.fill_mask(flat), "_")
        if self.eps is None:
            return format_d(flat, Specials([fill], self._python))
        suffix = "f" if self.nctype == "float" else ""
        spelled = [(np.isnan(flat), "NaN" + suffix), (flat == np.inf, "Infinity" + suffix),
                   (flat == -np.inf, "-Infinity" + suffix)]
        return format_g(flat, self.digits, Specials([*spelled, fill], self._python))

    def all_fill(self, values: np.ndarray) -> bool:
        """Whether every value is the fill (each prints as ``_``)."""
        if self.fill is None or self.nctype in ("string", "char"):
            return False
        flat = np.asarray(values).reshape(-1)
        if not self.fill_mask(flat[:1]).all():  # most batches: no need to look further
            return False
        return bool(self.fill_mask(flat).all())

    def _python(self, value: float) -> str:
        return str(self.fmt % value)

    def texts(self, values: np.ndarray, suffix: str = "") -> list[str]:
        """Each value's text followed by ``suffix``, the fill as ``_``, in C order.

        One comprehension of ``%`` over the batch: Python's ``%`` applies printf's rules
        (``%.7g`` of a float promoted to double, exactly as ncdump's ``snprintf``) in C.
        NaN and Infinity are spelled afterwards, at their few places, and are formatted as
        0 first: ``%d`` (a ``C_format``) would refuse them.
        """
        flat = np.asarray(values).reshape(-1)
        if self.nctype == "string":
            out = [string_data(v if isinstance(v, str) else from_bytes(v or b"")) + suffix for v in flat.tolist()]
        else:
            item = self.fmt + suffix.replace("%", "%%")
            special = np.flatnonzero(~np.isfinite(flat)) if self.eps is not None else np.zeros(0, dtype=np.intp)
            numbers = np.where(np.isfinite(flat), flat, 0) if special.size else flat
            if self.custom:
                out = [prim_text(self.fmt % v) + suffix for v in numbers.tolist()]
            else:
                out = [item % v for v in numbers.tolist()]
            for i in special.tolist():
                out[i] = self.text(flat[i]) + suffix
        for i in np.flatnonzero(self.fill_mask(flat)).tolist():
            out[i] = "_" + suffix
        return out

    def text(self, value: Any) -> str:
        """One value's text (attributes of ``-t`` and the specials of :meth:`texts`)."""
        if self.nctype == "string":
            return string_data(value if isinstance(value, str) else from_bytes(value or b""))
        if self.nctype in ("float", "double"):
            x = float(value)
            if math.isnan(x):
                return "NaNf" if self.nctype == "float" else "NaN"
            if math.isinf(x):
                return ("-" if x < 0 else "") + ("Infinityf" if self.nctype == "float" else "Infinity")
            return prim_text(self.fmt % x)
        return prim_text(self.fmt % int(value))


def _python_format(fmt: str) -> str:
    """A C printf format for Python's % operator (length modifiers such as ``l``/``ll`` dropped)."""
    return re.sub(r"(%[-+ #0-9.]*)(hh|h|ll|l|L|q|j|z|t)?([diouxXeEfFgGcs])", r"\1\3", fmt)
