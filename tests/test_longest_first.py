"""tests/longest_first.py: under --dist loadfile the files the last run spent longest on go out first, and each
run's seconds are recorded for the next (issue 37.1: the few-but-slow files came last, a tail on one worker)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.longest_first import load, longest_first, merged

QUICK = "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n\n\ndef test_c():\n    pass\n"
SLOW = "import time\n\n\ndef test_slow():\n    time.sleep(0.3)\n"


def test_the_longest_recorded_file_comes_first_and_an_unknown_one_is_weighed_by_its_tests():
    files = {"many.py": 30, "few_slow.py": 2, "unknown.py": 10, "quick.py": 5}
    record = {"many.py": 20.0, "few_slow.py": 70.0, "quick.py": 1.0}
    # unknown.py: 10 tests at 1.7 s, 17 s: between many.py (20 s) and quick.py (1 s)
    assert longest_first(files, record) == ["few_slow.py", "many.py", "unknown.py", "quick.py"]
    assert longest_first(files, {}) == ["many.py", "unknown.py", "quick.py", "few_slow.py"]  # xdist's own order


def test_a_run_of_some_files_keeps_what_is_recorded_of_the_others():
    assert merged({"a.py": 5.0, "b.py": 7.0}, {"b.py": 1.234, "c.py": 2.0}) == {"a.py": 5.0, "b.py": 1.23, "c.py": 2.0}


def test_a_record_that_is_not_one_is_no_record(tmp_path):
    assert load(tmp_path / "missing.json") == {}
    (tmp_path / "bad.json").write_text("[1, 2]")
    assert load(tmp_path / "bad.json") == {}
    (tmp_path / "half.json").write_text('{"a.py": 3, "b.py": "x"}')
    assert load(tmp_path / "half.json") == {"a.py": 3.0}


def _pytest(where: Path, record: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest with xdist and this plugin only (no other plugin's start-up: three interpreters start)."""
    env = {**os.environ, "NCZ_DURATIONS": str(record), "PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "xdist.plugin",
                           "-p", "tests.longest_first", "--dist", "loadfile", "--rootdir", str(where), *args,
                           str(where)], cwd=where, env=env, capture_output=True, text=True, timeout=120)


#: each worker points the record at a file of its own before it collects, each favouring another test file (a
#: worker reading the file would collect in its own order), and writes down the order it collected in
RACING_CONFTEST = """
import json, os


def pytest_configure(config):
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is not None:
        slow = "test_many_quick.py" if worker == "gw0" else "test_one_slow.py"
        os.environ["NCZ_DURATIONS"] += "." + worker
        with open(os.environ["NCZ_DURATIONS"], "w") as out:
            json.dump({slow: 100.0}, out)


def pytest_collection_finish(session):
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    if worker is not None:
        files = list(dict.fromkeys(item.nodeid.split("::")[0] for item in session.items))
        with open(os.path.join(str(session.config.rootpath), "order." + worker), "w") as out:
            json.dump(files, out)
"""


def test_each_worker_collects_in_the_order_of_the_record_the_controller_read_and_the_run_is_recorded(tmp_path):
    """xdist compares the workers' collections and hands the files out in that order: every worker must order by
    the one record the controller read, even when another suite's run rewrites it while they collect (a second
    checkout on this machine), or xdist stops (different tests collected). The run's seconds are then merged in."""
    (tmp_path / "test_many_quick.py").write_text(QUICK)
    (tmp_path / "test_one_slow.py").write_text(SLOW)
    (tmp_path / "conftest.py").write_text(RACING_CONFTEST)
    record = tmp_path / "durations.json"
    record.write_text('{"test_one_slow.py": 9.0, "test_many_quick.py": 1.0, "test_gone.py": 5.0}')
    ran = _pytest(tmp_path, record, "-n", "2", "--no-loadscope-reorder")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    for worker in ("gw0", "gw1"):
        assert json.loads((tmp_path / f"order.{worker}").read_text()) == ["test_one_slow.py", "test_many_quick.py"]
    seconds = json.loads(record.read_text())
    assert set(seconds) == {"test_many_quick.py", "test_one_slow.py", "test_gone.py"}
    assert seconds["test_one_slow.py"] >= 0.3 > seconds["test_many_quick.py"] and seconds["test_gone.py"] == 5.0


def test_scripts_test_keeps_the_order_in_both_runs():
    """xdist's default (--loadscope-reorder) sorts the files by their number of tests again."""
    lines = [line for line in (REPO / "scripts" / "test").read_text().splitlines() if "--dist loadfile" in line
             and not line.lstrip().startswith("#")]
    assert len(lines) == 2 and all("--no-loadscope-reorder" in line for line in lines), lines
