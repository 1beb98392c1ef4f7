"""Pure helpers for zmap keys: absolute, '/'-separated, relative to the dataset root.

Only store backends turn keys into paths, zip members or S3 names, and they
do it through :func:`validate` so that no key can escape the store.
"""
from __future__ import annotations

from nczarr_conformance.errors import FormatError

TYPE_CHECKING = False  # typing's constant without importing typing: 4 ms of ``nczarr-dump -h``'s start
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator


def join(*parts: str) -> str:
    """Join segments into one absolute key, ignoring empty segments."""
    segments: list[str] = []
    for part in parts:
        segments.extend(s for s in part.split("/") if s)
    return "/" + "/".join(segments)


def split(key: str) -> list[str]:
    """Segments of a key, without empty ones."""
    return [s for s in key.split("/") if s]


def parent(key: str) -> str:
    """The key one level up ('/' for top-level keys)."""
    segs = split(key)
    return join(*segs[:-1])


def basename(key: str) -> str:
    """Last segment of a key ('' for the root)."""
    segs = split(key)
    return segs[-1] if segs else ""


def validate(key: str) -> str:
    """Return the normalised key or raise if it could escape the store root.

    Rejects '..' and '.' segments, backslashes and control characters, which is
    what keeps a hostile zip member or S3 name from writing outside a target.
    """
    if not key.startswith("/"):
        key = "/" + key
    for seg in split(key):
        if seg in (".", "..") or "\\" in seg or any(ord(c) < 32 for c in seg):
            raise FormatError(f"unsafe key {key!r}")
    return join(key)


def members(parent_key: str, names: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Each member name a group lists, with its key under ``parent_key``; :func:`validate` refuses a name that
    would leave the store (``..``, a control character) before anything is read under it."""
    for name in names:
        validate(name)
        yield name, join(parent_key, name)


def split_v3_chunk(key: str) -> tuple[str, list[int]] | None:
    """A Zarr v3 chunk key of encoding ``default`` with ``/`` (``g/tas/c/3/0/0``; ``g/tas/c`` for a scalar) as
    (its array, its grid index), None when ``key`` is no such key. The index is the trailing run of numbers with
    ``c`` before it: an array or group named ``c`` or ``7`` still splits right, since no index part is ``c``.
    Leading and trailing ``/`` are kept off the array (``g/tas``)."""
    parts = split(key)
    end = len(parts)
    while end and parts[end - 1].isascii() and parts[end - 1].isdigit():
        end -= 1
    if end < 2 or parts[end - 1] != "c":
        return None
    return "/".join(parts[:end - 1]), [int(i) for i in parts[end:]]
