"""A dict-backed store for tests and dry runs."""
from __future__ import annotations

import sys
from collections.abc import Iterator

from nczarr_conformance.limits import too_big
from nczarr_conformance.stores.base import Store, slice_range


class MemoryStore(Store):
    kind = "memory"

    def __init__(self, objects: dict[str, bytes] | None = None, writable: bool = True) -> None:
        super().__init__()
        self.objects: dict[str, bytes] = dict(objects or {})
        self.writable = writable

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        limit = sys.maxsize if limit is None else limit
        data = self.objects.get(key)
        if data is not None and len(data) > limit:
            raise too_big(key, len(data), limit)
        return data

    def _get_range(self, key: str, start: int, length: int) -> tuple[bytes, int] | None:
        data = self.objects.get(key)
        return None if data is None else (slice_range(data, start, length), len(data))

    def _put(self, key: str, data: bytes) -> None:
        self.objects[key] = data

    def _delete(self, key: str) -> None:
        self.objects.pop(key, None)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        p = prefix.rstrip("/") + "/"
        return (k for k in list(self.objects) if k.startswith(p))

    def __repr__(self) -> str:
        return f"MemoryStore({len(self.objects)} objects)"
