"""The small text rules of ncdump 4.9.0 that a header needs: names, attribute values, declaration lines.

Each function mirrors one routine of netcdf-c's ``ncdump`` (named in its docstring).
They import no numpy, so ``nczarr-dump -h`` of a plain store starts without it
(cdl/quick_header.py); cdl/writer.py prints every header line through the same
functions, so the two cannot print a line differently. Text is a ``str`` whose
undecodable bytes are carried as surrogates (``surrogateescape``).
"""
from __future__ import annotations

import math

TYPE_CHECKING = False  # typing's constant without importing typing: 4 ms of ``nczarr-dump -h``'s start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: ASCII characters escaped with a backslash in names (utils.c ``escaped_name``).
NAME_SPECIALS = frozenset(" !\"#$&'()*,:;<=>?[]\\^`{|}~")
#: Variable names after which ncdump puts a space before ``:`` (ncdump.c ``keywords``).
KEYWORDS = frozenset({"variables", "dimensions", "data", "group", "types"})
ATT_SUFFIX = {"byte": "b", "short": "s", "int": "", "ubyte": "UB", "ushort": "US", "uint": "U",
              "int64": "LL", "uint64": "ULL"}
COMMON_ESCAPES = {0x08: "\\b", 0x0C: "\\f", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v", 0x5C: "\\\\",
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


def _escape_table(newlines: tuple[int, ...]) -> list[str]:
    """ncdump's escapes of text bytes, as a ``str.translate`` table over the bytes read as latin-1:
    ``newlines`` as ``\\n``, the common C escapes, other controls in octal; bytes >= 0x80 stay
    themselves (a UTF-8 sequence is copied whole)."""
    table = []
    for code in range(256):
        if code in newlines:
            table.append("\\n")
        elif code in COMMON_ESCAPES:
            table.append(COMMON_ESCAPES[code])
        elif _is_cntrl(code):
            table.append(f"\\{code:03o}")
        else:
            table.append(chr(code))
    return table


_ATTRIBUTE_ESCAPES = _escape_table((0x0A,))
_STRING_ESCAPES = _escape_table((0x0A, 0x0B))


def _escaped(raw: bytes, table: list[str]) -> str:
    """The bytes escaped through ``table``, one C-level pass (``translate``) whatever their length."""
    return from_bytes(raw.decode("latin-1").translate(table).encode("latin-1"))


def attribute_string(raw: bytes) -> str:
    """ncdump.c ``pr_att_string`` for a netCDF-4 file: trailing NULs dropped, controls in octal."""
    return '"' + _escaped(raw.rstrip(b"\x00"), _ATTRIBUTE_ESCAPES) + '"'


def tztrim(text: str) -> str:
    """ncdump.c ``tztrim``: drop trailing zeros after the decimal point, keep the point and any suffix.

    The mantissa is the leading ``-?[0-9.]*`` (scanned by hand: ``re`` costs ``nczarr-dump -h`` 5 ms to import)."""
    end = 1 if text.startswith("-") else 0
    while end < len(text) and text[end] in "0123456789.":
        end += 1
    mantissa, rest = text[:end], text[end:]
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
    """The right-hand side of an attribute line; ``value`` is text (char) or a sequence: a numpy array
    (the model's) or a list of Python numbers or strings (cdl/quick_header.py's)."""
    if nctype == "char":
        return attribute_string(to_bytes(value))
    value = _as_list(value)
    if nctype == "string":
        return ", ".join(attribute_string(to_bytes(str(v))) for v in value)
    if nctype in ("float", "double"):
        return ", ".join(float_attribute(float(v), nctype, float_digits, double_digits) for v in value)
    return ", ".join(f"{int(v)}{ATT_SUFFIX[nctype]}" for v in value)


def _as_list(value: Any) -> list[Any]:
    """Python values of a numpy array (``tolist``: float32 widened exactly to float) or of a list."""
    return list(value.tolist() if hasattr(value, "tolist") else value)


def string_data(value: str) -> str:
    """dumplib.c ``ncstring_typ_tostring``: controls in octal, ``\\v`` printed as ``\\n`` (as ncdump does)."""
    return '"' + _escaped(to_bytes(value).split(b"\x00", 1)[0], _STRING_ESCAPES) + '"'


def parent_path(path: str) -> str:
    """The group holding ``path`` (``/`` for a root member)."""
    return path.rsplit("/", 1)[0] or "/"


def dimension_name(gpath: str, ref: str, defines: Callable[[str, str], bool]) -> str:
    """The dimension ``ref`` (a path) as ncdump names it in group ``gpath``: relative, unless the name
    is not visible from ``gpath`` or a nearer group's dimension of that name hides it (then the
    whole path). ``defines(group, name)`` says whether a group defines a dimension of that name."""
    owner, name = parent_path(ref), ref.rsplit("/", 1)[-1]
    path, duplicate, found = gpath, False, False
    while True:
        if defines(path, name):
            if path == owner:
                found = True
                break
            duplicate = True
        if path == "/":
            break
        path = parent_path(path)
    if duplicate or not found:
        return escape_name(owner) + ("" if owner == "/" else "/") + escape_name(name)
    return escape_name(name)


def dimension_line(ind: str, name: str, size: int, unlimited: bool) -> str:
    """ncdump.c's line of one dimension (an unlimited one with its current length in a comment)."""
    extent = f"UNLIMITED ; // ({size} currently)" if unlimited else f"{size} ;"
    return f"{ind}\t{escape_name(name)} = {extent}\n"


def variable_line(ind: str, nctype: str, name: str, dimension_names: list[str]) -> str:
    """ncdump.c's declaration of one variable; ``dimension_names`` as :func:`dimension_name` gives them."""
    dims = ", ".join(dimension_names)
    return f"{ind}\t{nctype} {escape_name(name)}" + (f"({dims})" if dims else "") + " ;\n"


def attribute_line(ind: str, vname: str, aname: str, nctype: str, value: Any, float_digits: int,
                   double_digits: int) -> str:
    """ncdump.c ``pr_att``: one attribute (``vname`` "" for a group's), without its newline (``-t`` adds
    a comment of dates after it)."""
    prefix = "string " if nctype == "string" else ""
    space = " " if vname in KEYWORDS else ""
    return (f"{ind}\t\t{prefix}{escape_name(vname)}{space}:{escape_name(aname)} = "
            f"{attribute_values(nctype, value, float_digits, double_digits)} ;")


def group_attributes_heading(ind: str, root: bool) -> str:
    """The comment line before a group's attributes."""
    return f"\n{ind}// {'global' if root else 'group'} attributes:\n"
