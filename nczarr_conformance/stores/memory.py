"""A dict-backed store for tests and dry runs."""
from __future__ import annotations

from collections.abc import Iterator

from .base import Store


class MemoryStore(Store):
    kind = "memory"

    def __init__(self, objects: dict[str, bytes] | None = None, writable: bool = True) -> None:
        super().__init__()
        self.objects: dict[str, bytes] = dict(objects or {})
        self.writable = writable

    def _get(self, key: str) -> bytes | None:
        return self.objects.get(key)

    def _put(self, key: str, data: bytes) -> None:
        self.objects[key] = data

    def _delete(self, key: str) -> None:
        self.objects.pop(key, None)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        p = prefix.rstrip("/") + "/"
        return (k for k in list(self.objects) if k.startswith(p))

    def __repr__(self) -> str:
        return f"MemoryStore({len(self.objects)} objects)"
