"""Tiny outside implementations for the tests: Python scripts run as commands (``sys.executable SCRIPT …``),
exactly as a tool in another language would be, joined only through --reader/--writer/--caps or a TOML file.

The scripts read and write with this package's reader and writer (an implementation that is right, so
its cells pass against the cases' intended models, which are written in conformance/cases.py), and a
``mode`` argument plants what a broken implementation does: a wrong value, a crash, a hang.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

READER = '''\
import json, sys, time
mode, store, out = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "crash":
    sys.stderr.write("reading the store\\nValueError: planted crash in the reader\\n")
    sys.exit(3)
if mode == "slow":
    time.sleep(60)
from nczarr_conformance.access.dataset import open_dataset
doc = open_dataset(store).to_json()
if mode == "wrong":  # a reader that reads the scalar double d one off: 2.5 becomes 3.5
    for var in doc["root"]["variables"].values():
        if var["type"] == "double" and var["shape"] == []:
            var["data"] = var["data"] + 1
sys.stderr.write("warning: planted chatter on stderr\\n")
if out == "-":
    json.dump(doc, sys.stdout)
else:
    with open(out, "w") as f:
        json.dump(doc, f)
'''

WRITER = '''\
import json, sys
from nczarr_conformance.model import Dataset
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores import DirectoryStore
with open(sys.argv[1]) as f:
    dataset = Dataset.from_json(json.load(f))
with DirectoryStore(sys.argv[2], "w") as store:
    write_dataset(dataset, store)
'''


def scripts(directory: Path) -> tuple[Path, Path]:
    """(reader.py, writer.py) written into ``directory``."""
    reader, writer = directory / "reader.py", directory / "writer.py"
    reader.write_text(READER, encoding="utf-8")
    writer.write_text(WRITER, encoding="utf-8")
    return reader, writer


def command(script: Path, *args: str) -> str:
    """A command line running ``script`` with this Python, quoted for shlex."""
    return " ".join(shlex.quote(a) for a in (sys.executable, str(script))) + (" " + " ".join(args) if args else "")
