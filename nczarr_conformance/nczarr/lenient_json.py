"""netcdf-c's tolerance for the invalid JSON it writes itself.

netcdf-c copies a char attribute whose text looks like JSON into ``.zattrs`` verbatim
(Appendix D case 3), so ``"[0.,0.,1.]"`` becomes the bare ``[0.,0.,1.]``: not JSON,
since JSON numbers need a digit after the point (netcdf-c's own
``nczarr_test/ref_jsonconvention.zmap``). Its parser (``ncjson.c``) reads any run of
number characters that ``strtod`` takes as a number and keeps the token's text, so the
attribute reads back as the very text that was written (``ref_jsonconvention.cdl``).

:func:`loads` does the same, and only after strict parsing failed: number tokens
``strtod`` accepts but JSON does not (``0.``, ``.5``, ``+1``, ``1.e5``) become
:class:`LenientNumber`, a float that remembers its text for re-serialising.
"""
from __future__ import annotations

import json
import re

TYPE_CHECKING = False  # typing's constant without importing typing: 4 ms of ``nczarr-dump -h``'s start
if TYPE_CHECKING:
    from typing import Any

#: A number ``strtod`` reads whole (decimal only, as netcdf-c's lexer collects it).
_LOOSE_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MARK = "\u0000nczarr-lenient-number\u0000"


class LenientNumber(float):
    """A number netcdf-c wrote in a form JSON lacks; ``text`` is exactly what it wrote."""

    text: str

    def __new__(cls, text: str) -> LenientNumber:
        self = super().__new__(cls, float(text))
        self.text = text
        return self


def _mark_loose_numbers(text: str) -> tuple[str, int]:
    """``text`` with each non-JSON number token turned into a marked string, and how many."""
    out: list[str] = []
    count = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':  # copy a string whole, escapes included
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            continue
        m = _LOOSE_NUMBER.match(text, i) if c in "+-.0123456789" else None
        if m is None:
            out.append(c)
            i += 1
            continue
        token = m.group()
        if _JSON_NUMBER.fullmatch(token):
            out.append(token)
        else:
            out.append(json.dumps(_MARK + token))
            count += 1
        i = m.end()
    return "".join(out), count


def _restore(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_MARK):
        return LenientNumber(value[len(_MARK):])
    if isinstance(value, list):
        return [_restore(v) for v in value]
    if isinstance(value, dict):
        return {k: _restore(v) for k, v in value.items()}
    return value


def loads(text: str) -> tuple[Any, int]:
    """(value, number of non-JSON numbers tolerated) of text netcdf-c's parser reads.

    Raises ValueError, as ``json.loads`` does, when the text is broken beyond that.
    """
    if "nczarr-lenient-number" in text:
        raise ValueError("text holds the lenient parser's marker; not read leniently")
    marked, count = _mark_loose_numbers(text)
    if not count:
        raise ValueError("no non-JSON number to tolerate")
    return _restore(json.loads(marked, strict=False)), count


def unparse(value: Any) -> str:
    """JSON text in netcdf-c's layout: ``{"k": v, "k2": w}`` and ``[a,b]``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {unparse(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(unparse(v) for v in value) + "]"
    if isinstance(value, LenientNumber):
        return value.text  # as netcdf-c wrote it (``0.``), which its own parser keeps
    return json.dumps(value, ensure_ascii=False)
