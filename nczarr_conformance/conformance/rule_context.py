"""What a spec rule is evaluated against: the matrix run's stores and the stores built for a rule.

Its own module, below both rule families (``rules.py`` for Zarr v2 and NCZarr, ``rules_v3.py`` for Zarr v3),
so the v3 rules need not import the module that lists them.
"""
from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nczarr_conformance.conformance.matrix import MatrixRun
from nczarr_conformance.stores import open_store


class RuleContext:
    """One matrix run seen by the spec rules; a store a rule builds is built once, whichever thread asks."""

    def __init__(self, run: MatrixRun) -> None:
        self.run = run
        self.workdir = run.workdir / "rules"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._built: dict[str, Path] = {}
        self._building = threading.Lock()  # rules evaluated on several threads build each store once

    def store(self, case: str, writer: str) -> Path | None:
        url = self.run.stores.get((case, writer))
        return Path(url) if url else None

    def raw(self, case: str, writer: str, key: str) -> Any:
        """The JSON object ``key`` of what ``writer`` wrote for ``case`` (a directory or, from a command
        adapter's ``{zip}``, a zip store), or None when there is none."""
        path = self.store(case, writer)
        if path is None:
            return None
        if path.is_file():
            with open_store(str(path)) as store:
                data = store.get(key)
            return None if data is None else json.loads(data.decode("utf-8"), strict=False)
        if not (path / key.lstrip("/")).is_file():
            return None
        return json.loads((path / key.lstrip("/")).read_text(encoding="utf-8"), strict=False)

    def built(self, name: str, make: Callable[[Path], None]) -> Path:
        with self._building:
            if name not in self._built:
                path = self.workdir / name
                shutil.rmtree(path, ignore_errors=True)
                make(path)
                self._built[name] = path
            return self._built[name]

