"""Under ``--dist loadfile``, the test files the last run spent longest on are handed out first.

Why: pytest-xdist hands the files out in collection order, which by default (``--loadscope-reorder``) is the
number of tests a file holds, most first. Files of few but slow tests (the conformance matrix's module
fixture, mypy, the wheel's fresh venv) then come last, and one worker runs them while the other has nothing
left: a tail at the end of each run. Longest first ("longest processing time" order)
leaves the short files for the end, where they even out the two workers.

How: the controller sums each file's reported durations (setup, call, teardown) and, at the end of the run,
merges them into a JSON file outside the checkout (``~/.cache/nczarr-durations/pyXY.json``, one per Python
version, since the 3.11 and 3.13 runs run different cells at different speeds; ``NCZ_DURATIONS`` overrides
the path). The controller reads it once and sends it to each worker, which orders its collection by it
before the controller compares the workers' collections. A file the record does not know
is weighed by its number of tests at :data:`UNKNOWN_SECONDS_PER_TEST`. ``scripts/test`` passes
``--no-loadscope-reorder``, so xdist keeps this order. The order changes no test's outcome: xdist already runs
the files in any order, on either worker.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

#: a file the record does not know yet: about the suite's mean seconds per test (4430 s / 2667 tests, durations
#: of 2026-12-05, docs/testing.md)
UNKNOWN_SECONDS_PER_TEST = 1.7


def record_path() -> Path:
    default = Path.home() / ".cache" / "nczarr-durations" / f"py{sys.version_info[0]}{sys.version_info[1]}.json"
    return Path(os.environ.get("NCZ_DURATIONS", default))


def load(path: Path) -> dict[str, float]:
    """The recorded seconds per test file; nothing when there is no record or it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(k, str) and isinstance(v, int | float)}


def longest_first(files: Mapping[str, int], seconds: Mapping[str, float]) -> list[str]:
    """``files`` (file → number of tests, in collection order) ordered by recorded seconds, most first; an unknown
    file weighs its tests at UNKNOWN_SECONDS_PER_TEST; ties keep the collection order."""
    def weight(name: str) -> float:
        return seconds.get(name, UNKNOWN_SECONDS_PER_TEST * files[name])
    return sorted(files, key=lambda name: -weight(name))


def merged(old: Mapping[str, float], ran: Mapping[str, float]) -> dict[str, float]:
    """The record after a run: the files that ran take this run's seconds, the others keep theirs (a run of
    some files, ``-k`` or a path, forgets nothing about the rest)."""
    return {**old, **{name: round(value, 2) for name, value in ran.items()}}


def write(path: Path, record: Mapping[str, float]) -> None:
    """Atomically (a temp file renamed over it): another checkout's run on this machine may be reading it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".durations-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(dict(sorted(record.items())), out, indent=0)
    os.replace(tmp, path)


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _by_file(items: Iterable[pytest.Item]) -> dict[str, list[pytest.Item]]:
    grouped: dict[str, list[pytest.Item]] = {}
    for item in items:
        grouped.setdefault(_file_of(item.nodeid), []).append(item)
    return grouped


def _loadfile(config: pytest.Config) -> bool:
    """A controller (or a run without workers) given ``--dist loadfile``; xdist sets a worker's own ``dist`` to
    ``no``, so a worker goes by what its controller sent."""
    return getattr(config.option, "dist", "no") == "loadfile" and not hasattr(config, "workerinput")


_SENT: dict[str, str] = {}


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """The controller reads the record once and sends it to each worker: were each to read the file, another
    suite ending in between (a second checkout's run) could give two workers two orders, and xdist would stop
    (different tests collected)."""
    if not _loadfile(node.config):
        return
    if "record" not in _SENT:
        _SENT["record"] = json.dumps(load(record_path()))
    node.workerinput["ncz_durations"] = _SENT["record"]


def _record(config: pytest.Config) -> dict[str, float] | None:
    """The record to order by: the one the controller sent (a worker of a ``--dist loadfile`` run), the file (a
    run without workers), or None (any other run keeps its order)."""
    sent = getattr(config, "workerinput", {}).get("ncz_durations")
    if sent is not None:
        return {k: float(v) for k, v in json.loads(sent).items()}
    return load(record_path()) if _loadfile(config) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    record = _record(config)
    if record is None:
        return
    grouped = _by_file(items)
    order = longest_first({name: len(tests) for name, tests in grouped.items()}, record)
    items[:] = [item for name in order for item in grouped[name]]


_RAN: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _RAN[_file_of(report.nodeid)] = _RAN.get(_file_of(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On the controller of a parallel run only (a worker's reports reach the controller too)."""
    if not _loadfile(session.config) or hasattr(session.config, "workerinput") or not _RAN:
        return
    path = record_path()
    try:
        write(path, merged(load(path), _RAN))
    except OSError as exc:  # the order is an optimisation: a read-only home costs a slower run, not a failure
        print(f"tests/longest_first.py: cannot write {path}: {exc}", file=sys.stderr)
