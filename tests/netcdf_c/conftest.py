"""Fixtures of the ported netcdf-c tests: stores built once per (case, writer) and shared by the readers."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.netcdf_c.harness import WriteFailed


class Stores:
    """Each store is built once per session; a writer's failure is kept and reported to every reader."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.built: dict[str, tuple[Path | None, Any]] = {}

    def get(self, key: str, make: Callable[[Path], Path]) -> tuple[Path | None, Any]:
        """(store, None) or (None, the writer's pinned failure)."""
        if key not in self.built:
            tmp = self.factory.mktemp(key.replace("/", "_")[:60], numbered=True)
            try:
                self.built[key] = (make(tmp), None)
            except WriteFailed as exc:
                self.built[key] = (None, exc.args[0])
        return self.built[key]


@pytest.fixture(scope="session")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    return Stores(tmp_path_factory)
