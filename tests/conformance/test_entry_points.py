"""Peers and check rules from other distributions: entry points of groups ``nczarr_conformance.peers`` and
``nczarr_conformance.rules``, loaded at start; an id claimed twice is refused in one line naming both.

Each test installs a temporary distribution the way an installer leaves one: a package and its
``NAME-VERSION.dist-info`` (METADATA and entry_points.txt) in a directory put on the commands' path, which
is all importlib.metadata reads. The commands run as subprocesses (``sys.executable -m …``), as a user's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

PLUGIN = '''\
from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.peers.base import Peer


class Mine(Peer):
    """A reader another project ships: ours underneath, so its cells pass against the cases' models."""

    id, name, reads = "myplug-reader", "a reader from an entry point", True
    capabilities = frozenset({"nczarr", "attributes", "scalars"})

    def version(self):
        return "1.0"

    def read(self, url):
        return open_dataset(url)


def peers():
    return [Mine()]
'''

PLUGIN_RULES = '''\
from nczarr_conformance.checker.rules import Severity, rule


@rule("NCZ-PLUGIN-DEMO", Severity.INFO, source="myplug's own convention")
def demo(ctx):
    """A rule from another distribution: it finds nothing."""
    yield from ()
'''


def distribution(site: Path, name: str, modules: dict[str, str], entry_points: str) -> None:
    """A distribution as installed: its modules and its dist-info (METADATA, entry_points.txt)."""
    for module, text in modules.items():
        path = site / (module.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points), encoding="utf-8")


def cli(site: Path, module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{module}", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240, check=False)


def test_a_peer_and_a_rule_from_entry_points_join(tmp_path):
    site = tmp_path / "site"
    distribution(site, "myplug", {"myplug.__init__": PLUGIN, "myplug.rules": PLUGIN_RULES}, """
        [nczarr_conformance.peers]
        myplug = myplug:peers

        [nczarr_conformance.rules]
        myplug = myplug.rules
    """)
    done = cli(site, "report", "report", "--out", "out", "--peers", "ours,myplug-*", "--cases", "scalar,string-var",
               "--rules", "D.read.1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    interop = json.loads((tmp_path / "out" / "interop.json").read_text())
    impls = {i["id"]: i for i in interop["implementations"]}
    assert set(impls) == {"ours", "myplug-reader"} and impls["myplug-reader"]["version"] == "1.0"
    cells = {(c["case"], c["writer"], c["reader"]): c for c in interop["cells"]}
    assert cells[("scalar", "ours", "myplug-reader")]["status"] == "pass"
    assert cells[("string-var", "ours", "myplug-reader")]["message"] == \
        "myplug-reader does not declare strings (its capabilities)"
    rules = {(r["rule"], r["implementation"]): r for r in json.loads((tmp_path / "out" / "rules.json").read_text())[
        "results"]}
    assert rules[("D.read.1", "myplug-reader")]["status"] == "follows"  # graded by capability, not n/a

    listed = cli(site, "check", "--list-rules", cwd=tmp_path)
    assert listed.returncode == 0 and "NCZ-PLUGIN-DEMO" in listed.stdout, listed.stderr


def test_a_peer_id_claimed_twice_is_refused_naming_both_sources(tmp_path):
    site = tmp_path / "site"
    clash = PLUGIN.replace('"myplug-reader"', '"ours"')
    distribution(site, "dupplug", {"dupplug": clash}, """
        [nczarr_conformance.peers]
        dup = dupplug:peers
    """)
    done = cli(site, "report", "report", "--out", "out", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == ("nczarr-conformance: peer id 'ours' registered twice: first by nczarr_conformance.peers."
                           "ours, again by entry point dup = dupplug:peers of group "
                           "nczarr_conformance.peers (distribution dupplug 1.0)\n")
    assert not (tmp_path / "out").exists()


def test_a_rule_id_claimed_twice_is_refused_naming_both_sources(tmp_path):
    """Against a built-in rule, and between two plugins."""
    site = tmp_path / "site"
    distribution(site, "aplug", {"aplug": PLUGIN_RULES}, """
        [nczarr_conformance.rules]
        a = aplug
    """)
    distribution(site, "bplug", {"bplug": "def register():\n    " + PLUGIN_RULES.replace("\n", "\n    ")}, """
        [nczarr_conformance.rules]
        b = bplug:register
    """)
    done = cli(site, "check", "--list-rules", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr == ("nczarr-check: rule id NCZ-PLUGIN-DEMO registered twice: first by entry point a = aplug "
                           "of group nczarr_conformance.rules (distribution aplug 1.0), again by entry point b = "
                           "bplug:register of group nczarr_conformance.rules (distribution bplug 1.0)\n")

    builtin = tmp_path / "site2"
    distribution(builtin, "cplug", {"cplug": PLUGIN_RULES.replace("NCZ-PLUGIN-DEMO", "NCZ-LAYOUT-FLAVOR")}, """
        [nczarr_conformance.rules]
        c = cplug
    """)
    done = cli(builtin, "report", "report", "--out", "out", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr == (
        "nczarr-conformance: rule id NCZ-LAYOUT-FLAVOR registered twice: first by module nczarr_conformance.checker, "
        "again by entry point c = cplug of group nczarr_conformance.rules (distribution cplug 1.0)\n"), done.stderr


def test_an_entry_point_that_cannot_load_is_one_line_exit_2(tmp_path):
    site = tmp_path / "site"
    distribution(site, "gone", {"goneplug": "import no_such_module_ncz24\n"}, """
        [nczarr_conformance.peers]
        gone = goneplug:peers
    """)
    done = cli(site, "report", "report", "--out", "out", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr == (
        "nczarr-conformance: entry point gone = goneplug:peers of group nczarr_conformance.peers (distribution gone "
        "1.0): cannot load: ModuleNotFoundError: No module named 'no_such_module_ncz24'\n"), done.stderr
