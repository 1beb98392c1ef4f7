"""Each command ends its process with the code it returned, even where a native library's shutdown would abort.

icechunk 1.1.21's runtime can abort Python's shutdown (SIGABRT) after a failed virtual-chunk read, once
the one-line error is printed (tests/stores/test_icechunk.py's missing target, on a loaded machine); a
script that exits through ``cli.ending.exit_process`` skips that shutdown where icechunk is loaded.
"""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from nczarr_conformance.cli import console

ROOT = Path(__file__).resolve().parents[2]

# A child that stands for a command: an exit handler (ours: worker pools, child processes) and an object
# whose finalizer runs only in the interpreter's own shutdown, the stage icechunk's runtime aborts in.
CHILD = """
import atexit, sys
from nczarr_conformance.cli.ending import exit_process
if sys.argv[1] == "icechunk":
    sys.modules["icechunk"] = type(sys)("icechunk")
atexit.register(lambda: print("exit handler ran", flush=True))
class Shutdown:
    def __del__(self):
        print("interpreter shutdown ran", flush=True)
keep = Shutdown()
print("outcome", end="")
exit_process(3)
"""


def _child(loaded: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, loaded], capture_output=True, text=True, timeout=60)


def test_with_icechunk_loaded_the_exit_handlers_run_and_the_shutdown_is_skipped() -> None:
    done = _child("icechunk")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "outcomeexit handler ran\n"  # the unflushed outcome printed; no shutdown stage


def test_without_icechunk_the_process_exits_as_python_does() -> None:
    done = _child("none")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "outcomeexit handler ran\ninterpreter shutdown ran\n"


def test_every_script_and_module_entry_ends_through_exit_process() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == set(console.COMMANDS)
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        assert module == "nczarr_conformance.cli.console"
        assert getattr(console, function).__name__ == name.replace("-", "_")
    for path in [*sorted((ROOT / "nczarr_conformance" / "cli").glob("*.py")), ROOT / "nczarr_conformance/__main__.py"]:
        text = path.read_text()
        if '__name__ == "__main__"' in text:
            assert text.rstrip().endswith("exit_process(main())"), path


@pytest.mark.parametrize("name", sorted(console.COMMANDS))
def test_a_script_exits_with_its_commands_code(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The function a script calls runs that command and exits (SystemExit here) with the code it returned."""
    monkeypatch.delitem(sys.modules, "icechunk", raising=False)  # another test may have loaded it: not this one
    ran: list[str] = []
    monkeypatch.setattr(console, "run_command", lambda command, argv=None: ran.append(command) or 7)
    with pytest.raises(SystemExit) as ended:
        getattr(console, name.replace("-", "_"))()
    assert (ended.value.code, ran) == (7, [name])
