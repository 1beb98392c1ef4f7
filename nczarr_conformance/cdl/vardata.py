"""One variable's data section as ncdump's vardata.c prints it, a batch of values at a time.

Why in bulk: ncdump formats each value with one ``printf`` and wraps lines with ``lput``;
done value by value in Python that cost about 7 µs a value, 10–16× ncdump. Here a batch of
values is formatted at once (cdl/bulk.py: numpy for ``%g``/``%d``, Python's ``%`` for the
rest), ``lput``'s line breaks are found with numpy over the texts' byte lengths
(:func:`line_breaks`), separators and breaks are put in with numpy, and the batch goes out
as one ``write``. Memory stays at one slab plus two batches of texts. The text is byte for
byte ncdump's (tests/test_cdl_bulk.py compares it with ncdump 4.9.0 on random data; the
CDL baselines on netcdf-c's own).

``lput``'s rule, which everything here reproduces: a piece of ``n`` bytes starts a new line
(``"\\n"``, the group's indent, four spaces) when ``n > 2`` and it would pass the line length;
pieces are ``value, `` for all but a row's last value, which carries its closing braces; the
row's end (``,\\n`` then ``  ``, or `` ;\\n``) never breaks.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from nczarr_conformance.cdl.bulk import Items
from nczarr_conformance.cdl.text import char_data_string

LINE_INDENT = "    "  # vardata.c LINEPIND
#: values formatted at once: ~30 bytes each as a byte matrix, ~60 as Python strings, so a few MB
BATCH = 1 << 16
SEPARATOR = ", "
#: how a segment of values ends: the row goes on (its last value takes ", "), or the row ends
GOES_ON, NEXT_ROW, LAST_ROW = 0, 1, 2
ENDINGS = {NEXT_ROW: ",\n  ", LAST_ROW: " ;\n"}  # lput(",\n") + lput("  ") / lput(" ;") + lput("\n")
#: a batch of values (any shape) → their texts
MakeItems = Callable[[np.ndarray], Items]


def line_breaks(lengths: np.ndarray, starts: np.ndarray, ends: np.ndarray, pos: np.ndarray, max_len: int,
                base: int) -> tuple[np.ndarray, np.ndarray]:
    """Which pieces ``lput`` puts on a new line (in no particular order), and the column after each segment.

    Segment ``i`` is the pieces ``starts[i]:ends[i]`` (of byte ``lengths``), begun at column
    ``pos[i]``; after a break the column is ``base``. A piece breaks when it would end past
    ``max_len`` and is longer than 2 bytes; only a segment's last piece (a row's last value
    without its ``", "``) can be that short. Each line's end is found with ``searchsorted`` on
    the running sum of lengths; then the lines are followed, all segments at once when there
    are many (short rows), in Python when there are few (long rows).
    """
    n = len(lengths)
    cum = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=cum[1:])
    first = np.maximum(np.searchsorted(cum, cum[starts] + (max_len - pos), side="right") - 1, starts)
    end_pos = pos + cum[ends] - cum[starts]
    stop = ends - (lengths[ends - 1] <= 2)  # a short last piece never breaks
    wrapping = np.flatnonzero(first < stop)
    if wrapping.size == 0:
        return np.zeros(0, dtype=np.int64), end_pos
    # after a break at k the line holds k and every following piece whose end stays within max_len
    nxt = np.maximum(np.searchsorted(cum, cum[:-1] + (max_len - base), side="right") - 1, np.arange(1, n + 1))
    if wrapping.size >= 16:
        found, last = _follow_together(nxt, first[wrapping], stop[wrapping])
    else:
        found, last = _follow_each(nxt, first[wrapping], stop[wrapping])
    end_pos[wrapping] = base + cum[ends[wrapping]] - cum[last]
    return found, end_pos


def _follow_together(nxt: np.ndarray, at: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The breaks from ``at`` on, following ``nxt`` while before ``stop``, a step of every segment at once."""
    parts, last = [], at.copy()
    active = np.flatnonzero(at < stop)
    while active.size:
        here = at[active]
        parts.append(here)
        last[active] = here
        at[active] = nxt[here]
        active = active[at[active] < stop[active]]
    return np.concatenate(parts), last


def _follow_each(nxt: np.ndarray, at: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`_follow_together`, one segment at a time (a long row has many lines)."""
    step = nxt.tolist()
    found: list[int] = []
    append = found.append
    last = []
    for k, end in zip(at.tolist(), stop.tolist(), strict=True):
        previous = k  # every segment here breaks at least once
        while k < end:
            append(k)
            previous, k = k, step[k]
        last.append(previous)
    return np.array(found, dtype=np.int64), np.array(last, dtype=np.int64)


class DataSection:
    """The values of one variable after its ``name =``, for vardata.c's ``print_rows``."""

    def __init__(self, write: Callable[[str], object], shape: tuple[int, ...], unlimited: list[bool], indent: int,
                 max_len: int, items: MakeItems, same_text: Callable[[np.ndarray], bool] | None = None) -> None:
        self.write = write
        self.shape = shape
        self.rank = len(shape)
        self.unlimited = unlimited
        self.max_len = max_len
        self.base = indent + len(LINE_INDENT)
        self.brk = "\n" + " " * indent + LINE_INDENT
        self.row_pos = indent + 2  # where each row of a rank ≥ 2 variable starts, in lput's count
        self.items = items
        self.same_text = same_text  # whether all values of a batch print alike (all fill: unwritten chunks)

    def braces(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """vardata.c's ``{``/``}`` of inner unlimited dimensions: how many open before each row (given
        by its number in C order) and close after it, one per level whose inner indices all start
        (or all end) at that row."""
        opening = np.zeros(rows.size, dtype=np.int64)
        closing = np.zeros(rows.size, dtype=np.int64)
        levels = [level for level in range(1, self.rank) if self.unlimited[level]]
        if not levels:
            return opening, closing
        idx = np.unravel_index(rows, self.shape[:-1])
        for level in levels:
            first = np.ones(rows.size, dtype=bool)
            last = np.ones(rows.size, dtype=bool)
            for j in range(level, self.rank - 1):
                first &= idx[j] == 0
                last &= idx[j] == self.shape[j] - 1
            opening += first
            closing += last
        return opening, closing

    # ---- numbers and strings -------------------------------------------------------------
    def one_row(self, slabs: Iterable[np.ndarray], pos: int) -> None:
        """A scalar or 1-d variable: one row from column ``pos``, in as many slabs as it comes."""
        self._row((np.asarray(s).reshape(-1) for s in slabs), pos, 0, LAST_ROW)

    def rows(self, slabs: Iterable[np.ndarray]) -> None:
        """A variable of rank ≥ 2: rows along the last dimension, each from ``row_pos``."""
        ncols = self.shape[-1]
        total = math.prod(self.shape[:-1])
        if ncols > BATCH:
            for part, numbers in self._batches(slabs, 1):
                self._long_row(part[0], int(numbers[0]), total)
            return

        def consume(batch: _RowBatch, items: Items | None) -> None:
            part, numbers, opening, closing = batch
            if items is None:
                self._same_rows(part, numbers, total)
                return
            ending = np.where(numbers == total - 1, LAST_ROW, NEXT_ROW)
            starts = np.arange(part.shape[0], dtype=np.int64) * ncols
            self._emit(items, starts, starts + ncols, self.row_pos + opening, opening, closing, ending)

        with _FormatAhead(self.items, math.prod(self.shape) > BATCH) as ahead:
            ahead.run(self._plan(self._batches(slabs, max(1, BATCH // ncols))), consume)

    def _batches(self, slabs: Iterable[np.ndarray], step: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Whole rows, ``step`` at a time, and their numbers in C order."""
        ncols = self.shape[-1]
        done = 0
        for slab in slabs:
            block = np.asarray(slab).reshape(-1, ncols)
            for i in range(0, block.shape[0], step):
                part = block[i:i + step]
                yield part, np.arange(done + i, done + i + part.shape[0])
            done += block.shape[0]

    def _plan(self, batches: Iterator[tuple[np.ndarray, np.ndarray]]) -> Iterator[tuple[_RowBatch, np.ndarray | None]]:
        """Each batch of rows with the values to format, or None when its rows all print alike."""
        for part, numbers in batches:
            opening, closing = self.braces(numbers)
            alike = part.shape[0] > 2 and not opening.any() and not closing.any() and self.same_text is not None \
                and self.same_text(part)
            yield (part, numbers, opening, closing), None if alike else part

    def _same_rows(self, part: np.ndarray, numbers: np.ndarray, total: int) -> None:
        """Rows whose values all print alike print alike: the first is rendered and repeated."""
        ncols = part.shape[1]
        zero, width, start = np.zeros(1, dtype=np.int64), np.array([ncols]), np.array([self.row_pos])
        row, _ = self._segments(self.items(part[:1]), zero, width, start, zero, zero, np.array([NEXT_ROW]))
        last = numbers[-1] == total - 1
        text = row * (part.shape[0] - int(last))
        if last:
            text += self._segments(self.items(part[-1:]), zero, width, start, zero, zero, np.array([LAST_ROW]))[0]
        self.write(text)

    def _long_row(self, row: np.ndarray, number: int, total: int) -> None:
        """A row longer than a batch, wrapped in pieces."""
        opening, closing = self.braces(np.array([number]))
        self.write("{" * int(opening[0]))
        self._row(iter([row]), self.row_pos + int(opening[0]), int(closing[0]),
                  LAST_ROW if number == total - 1 else NEXT_ROW)

    def _row(self, pieces: Iterator[np.ndarray], pos: int, closing: int, ending: int) -> None:
        """One row arriving in pieces: each batch but the row's last value goes out at once; the last
        value waits for the next piece, then goes with its braces and ``ending``."""
        zero = np.zeros(1, dtype=np.int64)
        carried: list[np.ndarray] = []
        column = [pos]

        def consume(sub: np.ndarray, items: Items | None) -> None:
            if items is None:
                text, column[0] = self._same_run(self._text_of(sub[:1]) + SEPARATOR, sub.size - 1, column[0])
                self.write(text)
            else:
                column[0] = self._emit(items, zero, np.array([sub.size - 1]), np.array([column[0]]), zero, zero,
                                       np.array([GOES_ON]))

        with _FormatAhead(self.items, math.prod(self.shape) > BATCH) as ahead:
            ahead.run(self._run_batches(pieces, carried), consume)
        pos = column[0]
        if carried:
            self._emit(self.items(carried[0]), zero, np.ones(1, dtype=np.int64), np.array([pos]), zero,
                       np.array([closing]), np.array([ending]))

    def _run_batches(self, pieces: Iterator[np.ndarray], carried: list[np.ndarray]
                     ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """A row's batches, each but the row's last value (left in ``carried`` at the end) with the values
        to format, or None when they all print alike."""
        for piece in pieces:
            for i in range(0, piece.size, BATCH):
                sub = piece[i:i + BATCH]
                if carried:
                    sub = np.concatenate((carried.pop(), sub))
                carried.append(sub[-1:])
                if sub.size > 2 and self.same_text and self.same_text(sub[:-1]):
                    yield sub, None
                elif sub.size > 1:
                    yield sub, sub[:-1]

    def _text_of(self, value: np.ndarray) -> str:
        items = self.items(value)
        if items.texts is not None:
            return items.texts[0]
        assert items.mat is not None
        return bytes(items.mat[0, :int(items.lens[0])]).decode("ascii")

    def _same_run(self, piece: str, count: int, pos: int) -> tuple[str, int]:
        """``count`` equal pieces (an ASCII value and its ``", "``) from column ``pos``, wrapped as
        ``lput`` wraps them: as many as fit on the first line, then the same number on every line."""
        size = len(piece)
        first = min(count, max(0, (self.max_len - pos) // size))
        if first == count:
            return piece * count, pos + size * count
        per_line = max(1, (self.max_len - self.base) // size)
        lines, tail = divmod(count - first, per_line)
        text = piece * first + (self.brk + piece * per_line) * lines + (self.brk + piece * tail if tail else "")
        return text, self.base + size * (tail or per_line)

    def _emit(self, items: Items, starts: np.ndarray, ends: np.ndarray, pos: np.ndarray, opening: np.ndarray,
              closing: np.ndarray, ending: np.ndarray) -> int:
        """Write :meth:`_segments`' text; the column after it."""
        text, end = self._segments(items, starts, ends, pos, opening, closing, ending)
        self.write(text)
        return end

    def _segments(self, items: Items, starts: np.ndarray, ends: np.ndarray, pos: np.ndarray, opening: np.ndarray,
                  closing: np.ndarray, ending: np.ndarray) -> tuple[str, int]:
        """Segments of values (the rows of a batch, or one piece of a row): ``", "`` after each value,
        a segment's last value ended by ``ending`` (with its closing braces) unless the row goes on,
        ``opening`` braces before its first, line breaks where ``lput`` puts them; and the column after."""
        last = ends - 1
        row_end = ending != GOES_ON
        wrap = items.lens + len(SEPARATOR)
        wrap[last[row_end]] = items.lens[last[row_end]] + closing[row_end]  # its ending never breaks
        found, end_pos = line_breaks(wrap, starts, ends, pos, self.max_len, self.base)
        suffixes = {(int(c), int(e)): np.flatnonzero(row_end & (closing == c) & (ending == e))
                    for c, e in set(zip(closing[row_end].tolist(), ending[row_end].tolist(), strict=True))}
        ends_of = {"}" * c + ENDINGS[e]: last[rows] for (c, e), rows in suffixes.items()}
        opened = {int(starts[i]): "{" * int(opening[i]) for i in np.flatnonzero(opening).tolist()}
        return _render(items, ends_of, found, self.brk, opened), int(end_pos[-1])

    # ---- char ----------------------------------------------------------------------------
    def chars(self, slabs: Iterable[np.ndarray]) -> None:
        """vardata.c ``pr_tvals``: each row along the last dimension is one string (a 1-d or scalar
        variable is one string); the string itself is written past ``lput``, which does not count it."""
        if self.rank <= 1:
            raw = b"".join(np.ascontiguousarray(s, dtype="S1").tobytes() for s in slabs)
            self.write(char_data_string(raw) + ENDINGS[LAST_ROW])
            return
        ncols = self.shape[-1]
        total = math.prod(self.shape[:-1])
        done = 0
        for slab in slabs:
            block = np.ascontiguousarray(slab, dtype="S1").reshape(-1, ncols)
            strings: list[bytes] = block.view(f"S{ncols}").ravel().tolist()  # trailing NULs dropped, as ncdump
            numbers = np.arange(done, done + len(strings))
            opening, closing = self.braces(numbers)
            out = []
            for number, raw, o, c in zip(numbers.tolist(), strings, opening.tolist(), closing.tolist(), strict=True):
                wrap = c > 2 and self.row_pos + o + c > self.max_len
                out.append("{" * o + char_data_string(raw) + (self.brk if wrap else "") + "}" * c
                           + ENDINGS[LAST_ROW if number == total - 1 else NEXT_ROW])
            self.write("".join(out))
            done += len(strings)


_RowBatch = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # values, row numbers, braces opened, closed
Job = TypeVar("Job")


class _FormatAhead:
    """Formats the next batch on a second thread while this one lays out and writes the current one.

    Why: numpy releases the interpreter lock in its loops, so formatting (cdl/bulk.py) and packing
    (:func:`pack`) of successive batches overlap on two cores; the text and its order are unchanged,
    and memory holds one batch more. A variable of one batch formats in line (no thread). The
    worker computes under the caller's floating-point error state (numpy's is per thread).
    """

    def __init__(self, items: MakeItems, threaded: bool) -> None:
        self.items = items
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="nczarr-dump-format") if threaded else None

    def __enter__(self) -> _FormatAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _format(self, values: np.ndarray, errors: Any) -> Items:
        with np.errstate(**errors):
            return self.items(values)

    def run(self, jobs: Iterable[tuple[Job, np.ndarray | None]], consume: Callable[[Job, Items | None], None]) -> None:
        """``consume`` each job with its values' items (None for no values), in order, the next job's values
        formatted meanwhile. A consumed job's items are let go before the job after next is formatted: two
        batches of texts at most, one being written and one being formatted."""
        if self.pool is None:
            for job, values in jobs:
                consume(job, None if values is None else self.items(values))
            return
        errors = np.geterr()
        waiting: tuple[Job, Future[Items] | None] | None = None
        for job, values in jobs:
            future = None if values is None else self.pool.submit(self._format, values, errors)
            if waiting is not None:
                self._consume(waiting, consume)
            waiting = job, future
        if waiting is not None:
            self._consume(waiting, consume)

    @staticmethod
    def _consume(waiting: tuple[Job, Future[Items] | None], consume: Callable[[Job, Items | None], None]) -> None:
        job, future = waiting
        consume(job, None if future is None else future.result())


def _render(items: Items, ends_of: dict[str, np.ndarray], breaks: np.ndarray, brk: str,
            opened: dict[int, str]) -> str:
    """The batch's text: every value followed by ``", "`` or (at ``ends_of``' rows) that ending,
    ``brk`` before each of ``breaks`` and ``opened``'s braces before that (``lput`` order)."""
    if items.texts is not None:
        texts = [t + SEPARATOR for t in items.texts]
        for suffix, rows in ends_of.items():
            for k in rows.tolist():
                texts[k] = items.texts[k] + suffix
        for k in breaks.tolist():
            texts[k] = brk + texts[k]
        for k, braces in opened.items():
            texts[k] = braces + texts[k]
        return "".join(texts)
    return pack(items, ends_of, breaks, brk, opened).decode("ascii")


def pack(items: Items, ends_of: dict[str, np.ndarray], breaks: np.ndarray, brk: str,
          opened: dict[int, str]) -> bytes:
    """:func:`_render` for texts in a byte matrix: each piece is scattered to its place in the output,
    the texts one run of rows of one length at a time. ``ends_of``' suffixes replace the ``", "``
    after those values and must be at least as long."""
    assert items.mat is not None and items.order is not None
    lens = items.lens
    n = lens.size
    before = np.zeros(n, dtype=np.int64)
    for k, braces in opened.items():
        before[k] = len(braces)
    braces_len = before.copy()
    before[breaks] += len(brk)
    after = np.full(n, len(SEPARATOR), dtype=np.int64)
    for suffix, rows in ends_of.items():
        after[rows] = len(suffix)
    total = before + lens + after
    start = np.cumsum(total) - total
    text_at = start + before
    size = int(total.sum())
    out = _place_rows(items, text_at[items.order], size)
    end = text_at + lens
    for suffix, rows in ends_of.items():
        out[end[rows][:, None] + np.arange(len(suffix))] = np.frombuffer(suffix.encode("ascii"), dtype=np.uint8)
    if breaks.size:
        out[(start[breaks] + braces_len[breaks])[:, None] + np.arange(len(brk))] = np.frombuffer(
            brk.encode("ascii"), dtype=np.uint8)
    for k, braces in opened.items():
        out[start[k]:start[k] + len(braces)] = ord("{")
    return out.tobytes()


def _place_rows(items: Items, placed: np.ndarray, size: int) -> np.ndarray:
    """A zeroed output of ``size`` bytes with each matrix row's text and ``", "`` at its place.

    Numpy scatters bytes slowly (~4 ns each); here each row moves as little-endian 64-bit words:
    the row's bytes past its text are zeroed, each word is split in two by the destination's
    offset within a word, and the parts are added into the output's words (``np.add.at``, which
    also sums parts landing in one word). The rows' bytes do not overlap, so the sums carry
    nothing and equal the bytes themselves."""
    assert items.mat is not None
    mat = items.mat
    separator = np.frombuffer(SEPARATOR.encode("ascii"), dtype=np.uint8)
    for a, b, length in items.runs:  # each text with ", " (row ends are longer and overwrite it)
        mat[a:b, length:length + len(SEPARATOR)] = separator
        mat[a:b, length + len(SEPARATOR):] = 0
    words = mat.view("<u8").T.copy()  # (width / 8, n): each word of every row, contiguous
    nwords = words.shape[0]
    out = np.zeros(size // 8 + nwords + 2, dtype="<u8")
    at = placed >> 3
    shift = ((placed & 7) * 8).astype(np.uint64)
    back = np.uint64(64) - shift
    carry = np.zeros(placed.size, dtype=np.uint64)
    for j in range(nwords):
        word = words[j]
        np.add.at(out, at + j, (word << shift) + carry)
        carry = np.where(shift == 0, np.uint64(0), word >> back)  # a shift by 64 would keep the word
    np.add.at(out, at + nwords, carry)
    return out.view(np.uint8)[:size]


__all__ = ["BATCH", "LINE_INDENT", "DataSection", "Items", "line_breaks", "pack"]
