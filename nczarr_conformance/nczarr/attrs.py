"""The JSON attribute convention (nczarr.md Appendix D), both directions.

Writing a char attribute, by default (``lossless``): the text as a JSON string,
always (Appendix D case 4 for every text). Every reader gets the text back exactly:
netcdf-c 4.10.1 reads a char attribute written as a JSON number or boolean
(case 3) as one character (``_Unsigned="true"`` → ``"1"``, ``version="1.2"`` →
``"1"``; a lost ``_Unsigned`` turns ubyte data signed), and Zarr readers see a
number where the source had text.

``spec`` (``nc2nczarr --json-attributes=spec``) writes Appendix D literally:
case 3 stores text that parses as JSON as the JSON it spells (``"42"`` → ``42``,
``'{"a": 1}'`` → ``{"a": 1}``), case 4 stores other text as a JSON string.
nczarr.md calls the convention "almost idempotent" because re-serialising loses
whitespace; we make it idempotent: case 3 applies when the JSON reads back as
exactly the same text (netcdf-c's layout, see :func:`unparse`), else the text is
kept whole as case 4 (``"[1, 2]"`` stays ``"[1, 2]"``). Text spelling a JSON
string (``'"x"'``) or a non-standard constant (``NaN``) is case 4 too: written as
JSON it would read back without its quotes.

The mode is a context variable (:func:`json_attributes`), so a caller picks it
around a whole write without every layer passing it along.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from nczarr_conformance.errors import FormatError
from nczarr_conformance.flavor_names import JSON_ATTRIBUTE_MODES
from nczarr_conformance.model import Attribute
from nczarr_conformance.nczarr.dtypes import (
    DEFAULT_MAXSTRLEN,
    NUMERIC,
    attr_type_string,
    parse_attr_type,
)
from nczarr_conformance.nczarr.lenient_json import unparse as unparse

#: How char text that parses as JSON is written (modes in flavor_names.JSON_ATTRIBUTE_MODES):
#: ``lossless`` (a JSON string) or ``spec`` (App. D case 3).
_MODE: ContextVar[str] = ContextVar("json_attributes", default="lossless")

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT64_MAX = 2**64 - 1


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def as_json_expression(text: str) -> tuple[bool, Any]:
    """(True, value) when Appendix D case 3 applies to ``text`` losslessly."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        return False, None
    if isinstance(value, str) or unparse(value) != text:
        return False, None
    return True, value


def float_json(x: float, nctype: str) -> float | str:
    """Shortest decimal that reads back at the type's precision; non-finite as Zarr strings."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if nctype == "float":
        return float(str(np.float32(x)))
    return float(x)


@contextmanager
def json_attributes(mode: str) -> Iterator[None]:
    """Within the block, char attributes are written in ``mode`` (one of JSON_ATTRIBUTE_MODES)."""
    if mode not in JSON_ATTRIBUTE_MODES:
        raise ValueError(f"json attribute mode {mode!r} is not one of {', '.join(JSON_ATTRIBUTE_MODES)}")
    token = _MODE.set(mode)
    try:
        yield
    finally:
        _MODE.reset(token)


def encode(attr: Attribute, *, json_convention: bool = True, mode: str | None = None) -> tuple[Any, str]:
    """(JSON value, _nczarr_attr dtype) for one attribute.

    Char text is written as Appendix D case 3 only in ``spec`` mode (``mode``, else the one
    :func:`json_attributes` set, else ``lossless``) and only where the layout records the
    type that undoes it (``json_convention``; False for pure Zarr and netcdf-c 4.9.0's layout).
    """
    if attr.type == "char":
        spec = json_convention and (mode or _MODE.get()) == "spec"
        applies, value = as_json_expression(attr.value) if spec else (False, None)
        return (value if applies else attr.value), attr_type_string("char")
    if attr.type == "string":
        items = [str(v) for v in attr.value.tolist()]
        longest = max((len(s.encode("utf-8")) for s in items), default=1)
        type_text = attr_type_string("string", max(DEFAULT_MAXSTRLEN, longest))
        return (items[0] if len(items) == 1 else items), type_text
    if attr.type in ("float", "double"):
        values: list[Any] = [float_json(float(v), attr.type) for v in attr.value.tolist()]
    else:
        values = [int(v) for v in attr.value.tolist()]
    return (values[0] if len(values) == 1 else values), attr_type_string(attr.type)


#: Why an attribute named "" is refused: netCDF has no such name (netcdf-c's NC_check_name answers NC_EBADNAME,
#: so nothing netCDF writes holds one), netcdf-c 4.9.0's ncdump stops at it ("NetCDF: Attribute not found") and
#: CDL has no spelling for it (``temp: = 1 ;`` is no CDL). A FormatError rather than a skipped attribute: a
#: reader that dropped it would read the dataset as something it is not, without saying so.
EMPTY_NAME = "an attribute with an empty name: netCDF names are never empty (netcdf-c: NC_EBADNAME)"


def refuse_empty_names(names: Any, where: str) -> None:
    """Raise FormatError (one line naming ``where``, the object) when an attribute name is ""."""
    if "" in names:
        raise FormatError(f"{where}: {EMPTY_NAME}")


def decode(value: Any, type_text: Any) -> Attribute:
    """An attribute from its JSON value and optional dtype (Appendix D read cases)."""
    nctype = parse_attr_type(type_text) if type_text is not None else _infer(value)
    if nctype is None:
        raise FormatError("internal |J0 attribute has no netCDF value")
    if nctype == "char":
        return Attribute("char", value if isinstance(value, str) else unparse(value))
    items = value if isinstance(value, list) else [value]
    if not items or any(isinstance(v, (dict, list)) for v in items):
        return Attribute("char", unparse(value))
    if nctype == "string":
        return Attribute("string", np.array([v if isinstance(v, str) else unparse(v) for v in items], dtype=object))
    return Attribute(nctype, np.array([_number(v, nctype) for v in items], dtype=NUMERIC[nctype]))


def _number(v: Any, nctype: str) -> Any:
    if nctype in ("float", "double"):
        if isinstance(v, str):
            special = {"NaN": math.nan, "nan": math.nan, "Infinity": math.inf, "-Infinity": -math.inf,
                       "inf": math.inf, "-inf": -math.inf}
            if v in special:
                return special[v]
            try:
                return float(v)
            except ValueError:
                raise FormatError(f"attribute value {v!r} is not a {nctype}") from None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise FormatError(f"attribute value {v!r} is not a {nctype}")
        return v
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, str):
        try:
            v = int(v)
        except ValueError:
            raise FormatError(f"attribute value {v!r} is not an integer ({nctype})") from None
    if not isinstance(v, int):
        raise FormatError(f"attribute value {v!r} is not an integer ({nctype})")
    info = np.iinfo(NUMERIC[nctype])
    if not info.min <= v <= info.max:
        raise FormatError(f"attribute value {v} is out of range for {nctype}")
    return v


def _infer(value: Any) -> str:
    """Type of an untyped (pure Zarr) attribute, from its JSON value."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        return "char"
    if any(isinstance(v, float) for v in items):
        return "double"
    lo, hi = min(items), max(items)
    first = _netcdf_c_int_type(items[0])
    if all(_RANGES[first][0] <= v <= _RANGES[first][1] for v in items):
        return first  # netcdf-c: the first value's type; it refuses the dataset when another does not fit
    if INT32[0] <= lo and hi <= INT32[1]:
        return "int"
    if INT64[0] <= lo and hi <= INT64[1]:
        return "int64"
    if lo >= 0 and hi <= UINT64_MAX:
        return "uint64"
    return "double"


_RANGES = {"int": INT32, "uint": (0, 2**32 - 1), "int64": INT64, "uint64": (0, UINT64_MAX)}


def _netcdf_c_int_type(v: int) -> str:
    """netcdf-c's type for one untyped JSON integer (libnczarr ``NCZ_inferinttype``): uint64 from INT64's maximum
    up, int64 below INT32's minimum, int within INT32, uint up to 2**32 - 1, else int64 (a value no type holds gets
    one it does not fit, so the caller falls back)."""
    if v >= INT64[1]:
        return "uint64"
    if v < INT32[0]:
        return "int64"
    if v <= INT32[1]:
        return "int"
    if v <= _RANGES["uint"][1]:
        return "uint"
    return "int64"
