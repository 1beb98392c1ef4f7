"""A deflate-only chunk's selected elements, copied out of its inflated bytes a piece at a time.

Why: a time series ``[:, 100, 100]`` touches chunks of 25 MB decoded for a few bytes each; decoding each
whole held a chunk (and its compressed bytes) per reading thread, +80 to +120 MB for a read whose output
is nothing. Here the store hands the compressed bytes over in pieces (:meth:`Store.read_pieces`), they are
inflated a piece of about :data:`PIECE_BYTES` at a time (:class:`codecs.StreamInflater`, bounded by the
declared chunk size like every decode), and each piece gives the output the selected elements it holds,
by numpy indexing over whole rows: the inflated chunk is never allocated.

A *row* is a run of the chunk along its last axes that fits in a piece: the chunk is cut at the first axis
``k`` whose trailing extent (``chunks[k+1:]``) is at most :data:`PIECE_BYTES`, so the chunk is a sequence of
``prod(chunks[:k+1])`` rows, a piece a whole number of them. Only C order and slice selections take this
path (what :meth:`ArrayInfo.copy_chunk` checks); anything that goes wrong in a stream (a damaged,
truncated or over-long one) is :class:`codecs.StreamFailed`, and the caller decodes the chunk whole, which
words the error as every other read does.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nczarr_conformance.codecs import StreamInflater
from nczarr_conformance.stores.base import Store

#: decoded bytes inflated at a time (at least one row): a few of a chunk's, not all
PIECE_BYTES = 4 << 20
#: a selection taking at least this share of a chunk has the chunk's stored bytes fetched in one request
#: (:meth:`Store.read_pieces`'s ``whole``): it needs nearly all of them anyway
WHOLE_SHARE = 0.5


class SelectedRows:
    """Where the rows a slice selection of one chunk takes go in the output, for any piece of rows."""

    def __init__(self, chunks: tuple[int, ...], itemsize: int, src: tuple[slice, ...]) -> None:
        k = 0
        while k < len(chunks) - 1 and math.prod(chunks[k + 1:]) * itemsize > PIECE_BYTES:
            k += 1
        self.k = k
        self.tail = chunks[k + 1:]
        self.row_bytes = math.prod(self.tail) * itemsize
        self.rows_per_piece = max(1, PIECE_BYTES // self.row_bytes)
        self.tail_src = src[k + 1:]
        head = [range(*s.indices(n)) for s, n in zip(src[:k + 1], chunks[:k + 1], strict=True)]
        self.first_axis = head[0] if k == 0 else None
        if k:
            # the selected rows' numbers in the chunk, ascending (C order), and their places in the output's
            # first k + 1 axes: at most the selection's element count, which the output holds already
            self.lens = tuple(len(r) for r in head)
            grids = np.meshgrid(*(np.arange(r.start, r.stop, r.step, dtype=np.int64) for r in head), indexing="ij")
            self.rows = np.ravel_multi_index(tuple(g.ravel() for g in grids), chunks[:k + 1])
        self.last_row = (self.first_axis[-1] if self.first_axis is not None and len(self.first_axis)
                         else int(self.rows[-1]) if k and self.rows.size else -1)

    @property
    def piece_bytes(self) -> int:
        return self.rows_per_piece * self.row_bytes

    def place(self, target: np.ndarray, first_row: int, values: np.ndarray) -> None:
        """``target[...] = `` the selected elements of ``values``, the rows from ``first_row`` on (shape
        ``(n, *tail)``); ``target`` is the output's view of this chunk's share (shape: the selection's)."""
        last = first_row + len(values)
        if self.first_axis is not None:  # rows along the first axis: a slice of the output, a slice of the piece
            axis = self.first_axis
            lo = max(0, -(-(first_row - axis.start) // axis.step))
            hi = min(len(axis), -(-(last - axis.start) // axis.step))
            if lo < hi:
                start = axis[lo] - first_row
                picked = values[(slice(start, start + (hi - lo - 1) * axis.step + 1, axis.step), *self.tail_src)]
                target[lo:hi] = picked
            return
        lo, hi = np.searchsorted(self.rows, [first_row, last])
        if lo < hi:
            where = np.unravel_index(np.arange(lo, hi), self.lens)
            picked_rows: tuple[Any, ...] = (self.rows[lo:hi] - first_row, *self.tail_src)
            target[where] = values[picked_rows]


def copy_streamed(store: Store, ckey: str, limit: int, wbits: int, dtype: np.dtype[Any], chunks: tuple[int, ...],
                  target: np.ndarray, src: tuple[slice, ...]) -> bool:
    """``target[...] = chunk[src]`` for a chunk stored as one deflate stream (``wbits``: zlib's or gzip's
    framing), read through ``store.read_pieces`` (at most ``limit`` stored bytes) and inflated a piece at a
    time, never more than its declared size; False when the chunk was never written.

    :class:`codecs.StreamFailed` when the stream is not what the metadata declare (the caller decodes the
    chunk whole to say why), :class:`stores.base.RestartRead` when the store's pieces were void."""
    rows = SelectedRows(chunks, dtype.itemsize, src)
    nbytes = math.prod(chunks) * dtype.itemsize

    def emit(offset: int, data: bytes) -> None:
        first_row = offset // rows.row_bytes
        if first_row <= rows.last_row:  # past the last selected row, the rest is inflated only to be checked
            values = np.frombuffer(data, dtype=dtype).reshape(-1, *rows.tail)
            rows.place(target, first_row, values)

    inflater = StreamInflater(wbits, nbytes, rows.piece_bytes, emit)
    taken = math.prod(len(range(*s.indices(c))) for s, c in zip(src, chunks, strict=False))
    if not store.read_pieces(ckey, limit, inflater.feed, whole=taken >= WHOLE_SHARE * math.prod(chunks)):
        return False
    inflater.finish()
    return True
