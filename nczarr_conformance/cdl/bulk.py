"""printf's ``%.Pg`` and ``%d`` for a whole array at once, byte for byte, and the batch of texts they make.

Why: Python's ``'%.7g' % x`` is exact but costs about as much as ncdump's whole work per
value. Here the digits are computed with numpy, four at a time from a table, and laid out
in a byte matrix, several times faster; ``Items`` then carries the batch to
cdl/vardata.py, which places separators and line breaks and writes it as one block.

Exactness. ``%.Pg`` needs the value rounded to P significant digits, ties to even on the
exact binary value (glibc and Python agree). The value is scaled by a correctly rounded
power of ten in float64 (P ≤ 9) or x87 long double (P ≤ 15); the scaled value's error is
then below 3·10⁻⁷ (resp. 2·10⁻⁴) of a unit in the last digit, so the rounding is certain
unless the scaled value lies within 10⁻⁶ (resp. 10⁻³) of a half: those few values (true
ties among them) are formatted by Python's ``%``, as are exponents beyond the tables and
precisions beyond 15. The exponent X of the rounded value picks the style as C says:
``%f`` with P-1-X decimals when -4 ≤ X < P, else ``%e`` (two exponent digits at least);
trailing zeros and a bare point go (no ``#`` flag).

Layout. Values are sorted (a radix sort of small keys) by style, exponent, sign and text
length: values sharing those share one layout, so each group is written with a few slice
copies, and vardata.py packs each group of one length into the output with one scatter.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

_LONG = np.finfo(np.longdouble).nmant >= 63  # x87 extended: 15 digits of a double round with certainty
_LIMIT = 290  # decimal exponents the power tables cover; values beyond go to Python's %
#: constant texts (fill, NaN, Infinity) and the values Python formats come after the layouts' codes
_MAX_CODES = 64


def _powers(dtype: type) -> np.ndarray:
    """10**e for e in [-_LIMIT-20, _LIMIT+20], each correctly rounded (parsed from its decimal text)."""
    return np.array([dtype(f"1e{e}") for e in range(-_LIMIT - 20, _LIMIT + 21)], dtype=dtype)


_TABLES: dict[type, np.ndarray] = {}


def _table(dtype: type) -> np.ndarray:
    if dtype not in _TABLES:
        _TABLES[dtype] = _powers(dtype)
    return _TABLES[dtype]


def _four_digits() -> tuple[np.ndarray, np.ndarray]:
    """Every number 0..9999 as four ASCII digits (one uint32 each) and its count of trailing zeros."""
    n = np.arange(10000)
    digits = np.stack([n // 1000, n // 100 % 10, n // 10 % 10, n % 10], axis=1)
    codes = (digits + ord("0")).astype(np.uint8).view(np.uint32).reshape(-1)
    trailing = sum((n % 10 ** k == 0).astype(np.int8) for k in (1, 2, 3)) + (n == 0)  # 4 for 0
    return codes, trailing.astype(np.int8)


_FOUR, _FOUR_TRAILING = _four_digits()


@dataclass
class Items:
    """The texts of a batch of values.

    Either ``texts`` (any text, from Python's ``%`` and the escapes) or a byte matrix: row ``r``
    of ``mat`` holds the text of value ``order[r]``, and ``runs`` lists row ranges
    ``(start, stop, length)`` whose texts all have that length (ASCII). ``lens`` is each value's
    text length in bytes, in the values' order.
    """

    lens: np.ndarray
    texts: list[str] | None = None
    mat: np.ndarray | None = None  # with 2 bytes to spare after each text, for its separator
    order: np.ndarray | None = None
    runs: list[tuple[int, int, int]] = field(default_factory=list)

    @classmethod
    def of_texts(cls, texts: list[str], ascii_only: bool) -> Items:
        if ascii_only:
            lens = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        else:
            lens = np.fromiter((len(t.encode("utf-8", "surrogateescape")) for t in texts), dtype=np.int64,
                               count=len(texts))
        return cls(lens, texts=texts)


@dataclass
class Specials:
    """What a bulk formatter leaves to others: values whose text is a constant (the fill ``_``, NaN,
    Infinity: later masks win), and how Python formats one value (near-ties, far exponents)."""

    constants: list[tuple[np.ndarray, str]]
    python: Callable[[float], str]


def _digits(m: np.ndarray, ndigits: int) -> tuple[np.ndarray, np.ndarray]:
    """The last ``ndigits`` decimal digits of non-negative integers (ASCII, most significant first,
    shape (n, ndigits)) and how many of them are trailing zeros, four digits per table look-up."""
    groups = -(-ndigits // 4)
    words, trailing = [], np.zeros(0, dtype=np.int8)
    rest = m
    for g in range(groups):  # least significant group first
        high = rest // rest.dtype.type(10000)  # numpy divides by a constant fast; % it does not
        low = rest - high * rest.dtype.type(10000)
        rest = high
        words.append(_FOUR[low])
        zeros = _FOUR_TRAILING[low]
        trailing = zeros if g == 0 else np.where(trailing == 4 * g, 4 * g + zeros, trailing)
    if not m.size:
        return np.zeros((0, ndigits), dtype=np.uint8), np.zeros(0, dtype=np.int64)
    matrix = np.stack(words[::-1], axis=1).view(np.uint8).reshape(m.size, 4 * groups)
    return matrix[:, 4 * groups - ndigits:], trailing.astype(np.int64)


def _sorted_runs(keys: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """A stable order of the rows by key (small ints: a radix sort) and the runs of equal keys."""
    order = np.argsort(keys.astype(np.uint16), kind="stable")
    ordered = keys[order]
    bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), keys.size]
    return order, [(a, b, int(ordered[a])) for a, b in itertools.pairwise(bounds) if b > a]


@dataclass
class _Layouts:
    """What a formatter computed for the values that are not constants: each one's text length,
    layout code (< _MAX_CODES - constants - 1) and sign, which ones Python must format, and how to
    write a group of one code, sign and length (given the values' indices among these)."""

    lens: np.ndarray
    code: np.ndarray
    sign: np.ndarray
    python: np.ndarray
    width: int
    write: Callable[[np.ndarray, int, np.ndarray], None]


def _format(values: np.ndarray, specials: Specials, compute: Callable[[np.ndarray], _Layouts]) -> Items:
    """Constants put in, ``compute`` run on the other values only (a variable mostly fill costs
    little), Python's texts put in; rows sorted by (code, sign, length); each run laid out."""
    flat = values.reshape(-1)
    n = flat.size
    constant = np.zeros(n, dtype=bool)
    for mask, _ in specials.constants:
        constant |= mask
    rest = np.flatnonzero(~constant) if constant.any() else None
    part = compute(flat if rest is None else flat[rest])
    if rest is None:
        lens, code, sign = part.lens, part.code, part.sign
        python_rows, position = part.python, np.arange(n)
    else:
        lens, code, sign = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        lens[rest], code[rest], sign[rest] = part.lens, part.code, part.sign
        python_rows, position = rest[part.python], np.zeros(n, dtype=np.int64)
        position[rest] = np.arange(rest.size)  # a value's index among the computed ones
    first_special = _MAX_CODES - len(specials.constants) - 1
    for i, (mask, text) in enumerate(specials.constants):
        rows = np.flatnonzero(mask)
        code[rows] = first_special + i
        sign[rows] = 0
        lens[rows] = len(text)
    texts: dict[int, bytes] = {}
    if python_rows.size:
        texts = {int(r): specials.python(float(flat[r])).encode("ascii") for r in python_rows.tolist()}
        code[python_rows] = _MAX_CODES - 1
        sign[python_rows] = 0
        lens[python_rows] = [len(t) for t in texts.values()]
    order, runs = _sorted_runs((code * 2 + sign) * 32 + lens)
    width = -(-max(part.width, 12) // 8) * 8  # 12: -Infinityf and its ", "; whole 64-bit words (vardata.pack)
    mat = np.empty((n, width), dtype=np.uint8)
    for a, b, key in runs:
        length, minus, c = key % 32, key // 32 % 2, key // 64
        if c == _MAX_CODES - 1:
            for r in range(a, b):
                raw = texts[int(order[r])]
                mat[r, :len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        elif c >= first_special:
            mat[a:b, :length] = np.frombuffer(specials.constants[c - first_special][1].encode("ascii"), dtype=np.uint8)
        else:
            if minus:
                mat[a:b, 0] = ord("-")
            part.write(mat[a:b, minus:], c, position[order[a:b]])
    return Items(lens.astype(np.int64), mat=mat, order=order, runs=[(a, b, key % 32) for a, b, key in runs])


def format_d(values: np.ndarray, specials: Specials) -> Items:
    """``%d`` of an integer array (any width, signed or not)."""
    limit = np.iinfo(values.dtype)
    width = max(len(str(limit.max)), len(str(limit.min).lstrip("-")))

    narrow = values.dtype.itemsize <= 4  # |v| fits 32 bits, whose divisions numpy does fastest

    def compute(v: np.ndarray) -> _Layouts:
        neg = v < 0 if v.dtype.kind == "i" else np.zeros(v.shape, dtype=bool)
        u = v.astype(np.uint64)
        u = np.where(neg, ~u + np.uint64(1), u)  # |v| without overflow at the most negative value
        if narrow:
            u = u.astype(np.uint32)
        digits, _ = _digits(u, width)
        nd = np.ones(v.shape, dtype=np.int64)
        for j in range(1, width):
            nd += u >= u.dtype.type(10 ** j)
        sign = neg.astype(np.int64)

        def write(rows: np.ndarray, count: int, idx: np.ndarray) -> None:
            rows[:, :count] = digits[idx, width - count:]

        return _Layouts(sign + nd, nd.copy(), sign, np.zeros(0, dtype=np.int64), width + 3, write)

    return _format(values, specials, compute)


def g_precision_supported(precision: int) -> bool:
    """Whether :func:`format_g` rounds this many digits with certainty here."""
    return precision <= 9 or (precision <= 15 and _LONG)


def _rounded(a: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``a`` (positive, finite) as ``m × 10^(exp10-p+1)`` with m of p digits, rounded to nearest;
    and which roundings are not certain (near a half, or beyond the tables)."""
    # the decimal exponent from the binary one (cheaper than log10); one off at most, fixed below
    exp10 = ((np.frexp(a)[1].astype(np.int64) - 1) * 30103) // 100000
    out_of_range = np.abs(exp10) > _LIMIT
    exp10[out_of_range] = 0
    dtype: type = np.float64 if p <= 9 else np.longdouble
    table = _table(dtype)
    arg: np.ndarray = np.where(out_of_range, 1.0, a).astype(dtype)
    y: np.ndarray = arg * table[(p - 1) - exp10 + _LIMIT + 20]
    for step, fix in ((-1, np.flatnonzero(y < 10 ** (p - 1))), (1, np.flatnonzero(y >= 10 ** p))):
        if fix.size:  # log10 can be one off next to a power of ten
            exp10[fix] += step
            y[fix] = arg[fix] * table[(p - 1) - exp10[fix] + _LIMIT + 20]
    unsure = (np.abs(y - np.floor(y) - 0.5) < (1e-6 if p <= 9 else 1e-3)) | out_of_range
    m = np.rint(y).astype(np.int64)
    carried = m >= 10 ** p
    m[carried] = 10 ** (p - 1)
    return m, exp10 + carried, unsure


def format_g(values: np.ndarray, precision: int, specials: Specials) -> Items:
    """``%.{precision}g`` of a float array; non-finite values must be among ``specials``' constants."""
    p = max(precision, 1)

    def compute(v: np.ndarray) -> _Layouts:
        x = v.astype(np.float64)
        neg = np.signbit(x)
        a = np.abs(x)
        zero = a == 0
        m, exp10, unsure = _rounded(np.where(zero, 1.0, a), p)
        m[zero] = 0
        exp10[zero] = 0
        digits, trailing = _digits(m, p)
        # small integers from here: numpy's loops over int16 move a quarter of int64's bytes
        e = exp10.astype(np.int16)
        nd = np.maximum(np.int16(p) - trailing.astype(np.int16), np.int16(1))  # digits shown (a zero: one)
        fixed = (e >= -4) & (e < p)
        three = (np.abs(e) >= 100).astype(np.int16)
        lens = np.where(fixed & (e >= 0), np.maximum(nd, e + 1) + (nd > e + 1), 1 - e + nd)
        sign = neg.astype(np.int16)
        lens = np.where(fixed, lens, nd + (nd > 1) + 4 + three) + sign
        code = np.where(fixed, e + 4, np.int16(p + 4))  # 0..p+3: %f with that exponent; p+4: %e

        def write(rows: np.ndarray, c: int, idx: np.ndarray) -> None:
            block = digits[idx]
            x = c - 4
            if c == p + 4:  # d.ddde±XX
                rows[:, 0] = block[:, 0]
                rows[:, 1] = ord(".")
                rows[:, 2:p + 1] = block[:, 1:]
                _exponent(rows, nd[idx], exp10[idx])
            elif x >= 0:  # ddd.ddd or ddd
                rows[:, :x + 1] = block[:, :x + 1]
                rows[:, x + 1] = ord(".")
                rows[:, x + 2:p + 1] = block[:, x + 1:]
            else:  # 0.000ddd
                zeros = b"0." + b"0" * (-x - 1)
                rows[:, :len(zeros)] = np.frombuffer(zeros, dtype=np.uint8)
                rows[:, len(zeros):len(zeros) + p] = block

        return _Layouts(lens, code, sign, np.flatnonzero(unsure & ~zero), p + 9, write)

    return _format(values, specials, compute)


def format_shortest32(values: np.ndarray, specials: Specials) -> Items:
    """Python's ``repr`` of the float nearest each float32's shortest decimal (numpy's ``str``): the
    JSON text of a float value. Non-finite values and zeros must be among ``specials``' constants.

    The shortest decimal is the one with fewest digits inside the float32's rounding interval,
    the closest of them if several. In units of the value's 9th significant digit the interval's
    ends (exact midpoints to the neighbours, scaled with an error below 10⁻⁶) are two numbers
    whose integer parts first differ at some digit P: a decimal of P digits lies between them and
    none shorter does. The closest P-digit decimal is taken (at a power of two, whose interval is
    narrower below, the one above if the closest falls out). Near-ties, ends within 10⁻⁶ of a
    whole unit and candidates within 10⁻⁶ of an end go to Python.
    """
    return _format(values, specials, _shortest32)


def _shortest32(values: np.ndarray) -> _Layouts:
    """:func:`format_shortest32` for finite non-zero values."""
    v = values.astype(np.float32)
    b = v.view(np.uint32) & np.uint32(0x7FFFFFFF)
    a = b.view(np.float32).astype(np.float64)
    below = (b - np.uint32(1)).view(np.float32).astype(np.float64)
    above = (b + np.uint32(1)).view(np.float32).astype(np.float64)
    above = np.where(np.isinf(above), 2 * a - below, above)  # past the largest float32
    _, exp10, unsure = _rounded(a, 9)
    scale = _table(np.float64)[8 - exp10 + _LIMIT + 20]  # to units of the 9th digit
    y9, low, high = a * scale, (a + below) / 2 * scale, (a + above) / 2 * scale
    margin = 1e-6
    for end in (low, high):
        frac = end - np.floor(end)
        unsure |= (frac < margin) | (frac > 1 - margin)
    over = high >= 1e9  # 10^(exp10+1) itself is inside: one digit
    low_digits, _ = _digits(np.floor(low).astype(np.int64), 9)
    high_digits, _ = _digits(np.minimum(np.floor(high), 1e9 - 1).astype(np.int64), 9)
    differ = low_digits != high_digits
    ndig = np.where(over, 1, np.where(differ.any(axis=1), np.argmax(differ, axis=1) + 1, 9))
    unit = 10.0 ** (9 - ndig)
    scaled = y9 / unit
    m = np.rint(scaled)
    unsure |= np.abs(scaled - np.floor(scaled) - 0.5) < margin
    found = _inside(m * unit, low, high)
    power_of_two = ((b & np.uint32(0x7FFFFF)) == 0) & (b > np.uint32(0x00800000))
    up = power_of_two & (found == 0) & (m * unit < y9)
    if up.any():
        alt = _inside((m + 1) * unit, low, high)
        m = np.where(up & (alt == 1), m + 1, m)
        found = np.where(up, alt, found)
    unsure |= found != 1
    m9 = m.astype(np.int64) * (10 ** (9 - ndig))
    carried = m9 >= 10 ** 9  # rounded up to the next power of ten
    m9[carried] = 10 ** 8
    return _layout_repr(m9, exp10 + carried, np.signbit(v), np.flatnonzero(unsure))


def _inside(candidate: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """1 where ``candidate`` is inside (low, high), 0 where outside, 2 where too close to tell."""
    margin = 1e-6
    close = (np.abs(candidate - low) < margin) | (np.abs(candidate - high) < margin)
    inside = (candidate > low) & (candidate < high)
    return np.where(close, 2, inside.astype(np.int64))


def _layout_repr(m9: np.ndarray, exp10: np.ndarray, neg: np.ndarray, python: np.ndarray) -> _Layouts:
    """``repr``'s layout of ``m9`` (9 digits) × 10^(exp10-8): positional from 1e-4 up to 1e16 (with
    ``.0`` when whole), else ``d.ddde±XX``."""
    p = 9
    digits, trailing = _digits(m9, p)
    nd = np.maximum(p - trailing, 1)
    sign = neg.astype(np.int64)
    positional = (exp10 >= -4) & (exp10 < 16)
    three = np.abs(exp10) >= 100
    whole = positional & (exp10 >= 0)
    lens = np.where(whole, exp10 + 2 + np.maximum(nd - exp10 - 1, 1), 1 - exp10 + nd)  # ddd.ddd or ddd.0
    lens = np.where(positional, lens, nd + (nd > 1) + 4 + three) + sign
    code = np.where(positional, exp10 + 4, 20)  # 0..19: positional with that exponent; 20: d.ddde±XX
    padded = np.concatenate((digits, np.full((digits.shape[0], 17), ord("0"), dtype=np.uint8)), axis=1)

    def write(rows: np.ndarray, c: int, idx: np.ndarray) -> None:
        x = c - 4
        if c == 20:
            block = digits[idx]
            rows[:, 0] = block[:, 0]
            rows[:, 1] = ord(".")
            rows[:, 2:p + 1] = block[:, 1:]
            _exponent(rows, nd[idx], exp10[idx])
        elif x >= 0:  # ddd.ddd, ddd.0
            block = padded[idx]
            rows[:, :x + 1] = block[:, :x + 1]
            rows[:, x + 1] = ord(".")
            rows[:, x + 2:x + 2 + p] = block[:, x + 1:x + 1 + p]  # a whole number's digit there is 0
        else:  # 0.000ddd
            zeros = b"0." + b"0" * (-x - 1)
            rows[:, :len(zeros)] = np.frombuffer(zeros, dtype=np.uint8)
            rows[:, len(zeros):len(zeros) + p] = digits[idx]

    return _Layouts(lens, code, sign, python, 32, write)


def _exponent(rows: np.ndarray, nd: np.ndarray, exp10: np.ndarray) -> None:
    """``e±XX`` (two digits at least, as C prints them) after the shown mantissa digits."""
    each = np.arange(rows.shape[0])
    at = nd + (nd > 1)  # where "e" goes
    mag = np.abs(exp10)
    three = mag >= 100
    rows[each, at] = ord("e")
    rows[each, at + 1] = np.where(exp10 < 0, ord("-"), ord("+"))
    rows[each, at + 2] = np.where(three, mag // 100, mag // 10) + ord("0")
    rows[each, at + 3] = np.where(three, mag // 10 % 10, mag % 10) + ord("0")
    rows[each[three], at[three] + 4] = mag[three] % 10 + ord("0")


__all__ = ["Items", "Specials", "format_d", "format_g", "format_shortest32", "g_precision_supported"]
