"""benchmarks/read.py stays runnable and reads every store kind issue 35 names (dir, zip, S3, HTTP).

The benchmark itself is never run here (it is minutes of reading, and speed is not a test): only its
arguments and which rows it would read, each in a fresh interpreter as the benchmark is run.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "read.py"

# issue 35: "the table above on a 400 MB store (dir, zip, moto S3, HTTP)"; the table's first two rows
EVERY_KIND = ["dir", "zip", "s3", "http"]
WHOLE, SERIES = "whole variable", "one point's time series [:, 100, 100]"
DIR_ONLY = ["2-D window [5, 100:340, 300:780]", "whole variable, with shuffle", "50 small variables, each whole"]


def _selected(kinds: list[str], only: str | None) -> list[list[str]]:
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import read; "
            "print(json.dumps(read.selected(json.loads(sys.argv[2]), json.loads(sys.argv[3]))))")
    done = subprocess.run([sys.executable, "-c", code, str(SCRIPT.parent), json.dumps(kinds), json.dumps(only)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [list(pair) for pair in json.loads(done.stdout)]


def test_help_offers_the_store_kinds() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "--stores" in done.stdout and "dir,zip,s3,http" in done.stdout


def test_an_unknown_store_kind_is_refused_before_any_work(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    done = subprocess.run([sys.executable, str(SCRIPT), "--stores", "dir,ftp", "--workdir", str(workdir)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "'dir,ftp'" in done.stderr and "dir,zip,s3,http" in done.stderr
    assert not workdir.exists()


def test_every_row_on_the_directory_store_and_the_first_two_on_every_other_kind() -> None:
    rows = [WHOLE, SERIES, *DIR_ONLY]
    expected = [["dir", r] for r in rows] + [[k, r] for k in EVERY_KIND[1:] for r in (WHOLE, SERIES)]
    assert _selected(EVERY_KIND, None) == expected
    assert _selected(["http", "zip"], "time series") == [["http", SERIES], ["zip", SERIES]]
