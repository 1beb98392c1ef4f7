"""ncdump's ``-b c|f`` and ``-f c|f``: a variable's data with comments naming each row or each value.

vardata.c's ``print_rows`` followed one row at a time, value by value. Why not cdl/vardata.py's bulk
path: the annotations are a reading aid for small variables, and ncdump writes them with ``printf``
(which ``lput``'s line position does not count) between ``lput`` calls, so the rows' layout is simplest
reproduced the way ncdump makes it. ``-b``: a ``// v(i, 0-N)`` line before each row of a variable of
rank ≥ 2, the row's values wrapped as without it. ``-f``: one value a line, each followed by
``// v(i,j)``, nothing wrapped. ``c`` prints C's 0-based indices, last dimension last; ``f`` Fortran's
1-based ones, last dimension first.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from nczarr_conformance.cdl.text import byte_len, char_data_string
from nczarr_conformance.cdl.vardata import LINE_INDENT, DataSection, Items

#: ``-b``/``-f`` values: C or Fortran indices (ncdump.c's LANG_C, LANG_F)
LANGUAGES = ("c", "f")


@dataclass(frozen=True)
class Annotations:
    """What ``-b``/``-f`` asked for: ``brief`` (``-b``: each row), ``full`` (``-f``: each value) or both, in
    ``lang`` (ncdump.c: the last of the two options given chooses it for both)."""

    brief: bool
    full: bool
    lang: str  # "c" or "f"


def texts(items: Items) -> list[str]:
    """Each value's text, in the values' order (cdl/bulk.py gives them as strings or as a byte matrix)."""
    if items.texts is not None:
        return items.texts
    assert items.mat is not None and items.order is not None
    out = [""] * int(items.lens.size)
    for row, value in enumerate(items.order.tolist()):
        out[value] = bytes(items.mat[row, :int(items.lens[value])]).decode("ascii")
    return out


class AnnotatedData:
    """``print_rows`` with ``formatting_specs.brief_data_cmnts`` or ``full_data_cmnts`` set."""

    def __init__(self, section: DataSection, printed_name: str, annotations: Annotations, start: int) -> None:
        self.section = section
        self.name = printed_name  # escaped, as print_name prints it
        self.brief = annotations.brief
        self.full = annotations.full
        self.fortran = annotations.lang == "f"
        self.indent = section.base - len(LINE_INDENT)
        self.linep = start  # lput's line position after ``name =``
        self.out: list[str] = []

    # ---- lput and its printf neighbours ------------------------------------------------
    def _printf(self, text: str) -> None:
        self.out.append(text)

    def _lput(self, text: str) -> None:
        """vardata.c ``lput``: a piece that would pass the line length starts a new line."""
        n = byte_len(text)
        if n + self.linep > self.section.max_len and n > 2:
            self.out.append("\n" + " " * self.indent + LINE_INDENT)
            self.linep = len(LINE_INDENT) + self.indent
        self.out.append(text)
        self.linep = self.indent if text.endswith("\n") else self.linep + n

    def _flush(self) -> None:
        self.section.write("".join(self.out))
        self.out.clear()

    # ---- the comments -------------------------------------------------------------------
    def _brief(self, cor: tuple[int, ...]) -> None:
        """vardata.c ``annotate_brief``: the row's indices, its last dimension as a range."""
        last = self.section.shape[-1]
        if self.fortran:
            span = "1" if last == 1 else f"1-{last} "
            where = span + "".join(f",{c + 1}" for c in reversed(cor))
        else:
            where = "".join(f"{c}," for c in cor) + ("0" if last == 1 else f" 0-{last - 1}")
        self._printf(f"// {self.name}({where})\n" + " " * self.indent + LINE_INDENT)
        self.linep = len(LINE_INDENT) + self.indent

    def _full(self, cor: tuple[int, ...], element: int) -> None:
        """vardata.c ``annotate``: one value's indices. A scalar is ``(0)`` in C; in Fortran ncdump 4.9.0
        prints memory before its index array (any number), and this prints ``(1)``."""
        if self.fortran:
            where = f"{element + 1}" + "".join(f",{c + 1}" for c in reversed(cor))
        else:
            where = "".join(f"{c}," for c in cor) + f"{element}"
        self._printf(f"  // {self.name}({where})\n    ")

    # ---- the rows -------------------------------------------------------------------------
    def rows(self, slabs: Iterable[np.ndarray], chars: bool) -> None:
        """Every row along the last dimension (a scalar or a 1-d variable is one row), in C order."""
        shape = self.section.shape
        ncols = shape[-1] if shape else 1
        outer = shape[:-1]
        total = math.prod(outer)
        for number, row in enumerate(_rows(slabs, ncols, len(shape))):
            cor = tuple(int(i) for i in np.unravel_index(number, outer)) if outer else ()
            opening, closing = (int(n[0]) for n in self.section.braces(np.array([number])))
            self._row(row, cor, ncols, opening, closing, number == total - 1, chars)
            if len(self.out) > 4096:
                self._flush()
        self._flush()

    def _row(self, row: np.ndarray, cor: tuple[int, ...], ncols: int, opening: int, closing: int, last_row: bool,
             chars: bool) -> None:
        for _ in range(opening):
            self._lput("{")
        if self.brief and len(self.section.shape) > 1 and ncols > 0:
            self._brief(cor)
        if chars:
            self._printf(char_data_string(np.ascontiguousarray(row, dtype="S1").tobytes()))
            final = ""
        else:
            values = texts(self.section.items(row))
            for i, text in enumerate(values[:-1]):
                if self.full:
                    self._printf(text + ", ")
                    self._full(cor, i)
                else:
                    self._lput(text + ", ")
            final = values[-1]
        final += "}" * closing
        if self.full:
            self._printf(final + (";" if last_row else ","))
            self._full(cor, ncols - 1)
        else:
            self._lput(final)
            for piece in ((" ;", "\n") if last_row else (",\n", "  ")):
                self._lput(piece)


def _rows(slabs: Iterable[np.ndarray], ncols: int, rank: int) -> Iterator[np.ndarray]:
    """Whole rows: a variable of rank ≥ 2 comes in slabs of whole rows, one of rank ≤ 1 in pieces of its row."""
    if rank <= 1:
        parts = [np.asarray(s).reshape(-1) for s in slabs]
        if parts:
            yield np.concatenate(parts)
        return
    for slab in slabs:
        yield from np.asarray(slab).reshape(-1, ncols)


__all__ = ["LANGUAGES", "AnnotatedData", "Annotations", "texts"]
