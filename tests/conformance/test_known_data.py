"""Known peer faults are data declared with their implementation (conformance/known.py), their evidence a
registry of named checks (conformance/evidence.py); the package names no implementation it does not hold."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from nczarr_conformance.cli import report as report_cli
from nczarr_conformance.conformance import gate
from nczarr_conformance.conformance import matrix as matrix_module
from nczarr_conformance.conformance.evidence import EVIDENCE, evidence_kind, make_evidence
from nczarr_conformance.conformance.known import known_of
from nczarr_conformance.conformance.matrix import Cell, MatrixRun
from nczarr_conformance.errors import DuplicateIdError, UsageError
from nczarr_conformance.peers import implementations
from nczarr_conformance.peers.base import PEERS, Peer, register, registered
from nczarr_conformance.peers.command import CONFIG_NAME, build, load_config
from nczarr_conformance.reader_needs import READERS
from tests.conftest import REPO

PACKAGE = REPO / "nczarr_conformance"
#: where a reader profile of nczarr-check (reader_needs.READERS: ``--for netcdf-c-4.9``) may be named: it is a
#: target the checker, the fixer and the converter plan for, not a graded implementation
PROFILE_FILES = ("checker/", "fix/", "cli/", "reader_needs.py")


def _outside_names() -> dict[str, str]:
    """Every way the committed config and adapters/ name an implementation nobody here wrote → what it is:
    each declared id and name, and each adapter's directory."""
    doc = tomllib.loads((REPO / CONFIG_NAME).read_text(encoding="utf-8"))
    names = {}
    for pid, spec in doc["implementations"].items():
        names[pid] = f"the id of [implementations.{pid}]"
        names[spec.get("name", pid)] = f"the name of [implementations.{pid}]"
    for adapter in (REPO / "adapters").iterdir():
        if adapter.is_dir():
            names[f"adapters/{adapter.name}"] = f"the adapter directory adapters/{adapter.name}"
    names["NCO"] = "NCO, ncks' suite"
    return names


def _mentions(names: dict[str, str]) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # the corpus's zip stores
        where = path.relative_to(PACKAGE).as_posix()
        for name, what in names.items():
            if name in READERS and where.startswith(PROFILE_FILES):
                continue
            for match in re.finditer(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\d)", text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"nczarr_conformance/{where}:{line}: {what} ({name})")
    return found


def test_the_package_names_no_outside_implementation():
    """Not ncks, zarrita, netcdf-c 4.9.0's tools, zarr-python 2.18 or 3.4, nor an adapter: their pinned faults
    are beside their adapters, so ours need not change when theirs do (the plugin bar)."""
    names = _outside_names()
    assert {"ncks", "zarrita", "netcdf-c-4.9", "zarr-python-2.18", "zarr-python-3.4", "adapters/nco",
            "adapters/zarr-conformance-action"} <= set(names)
    assert _mentions(names) == []


def test_the_name_check_finds_a_planted_name(tmp_path, monkeypatch):
    """The scan above sees a name where one is planted (and a reader profile outside the checker's files)."""
    planted = PACKAGE / "conformance" / "_planted_name_ncz37.py"
    planted.write_text('"""ncks and netcdf-c-4.9 named here."""\n', encoding="utf-8")
    try:
        found = _mentions(_outside_names())
    finally:
        planted.unlink()
    assert [f.split(": ", 1)[0] for f in found] == ["nczarr_conformance/conformance/_planted_name_ncz37.py:1"] * 2


def test_each_declared_implementation_carries_its_known_faults():
    """The committed config's implementations declare their pinned faults beside their adapters; every entry
    loads, and each names the implementation that declares it as the reader."""
    peers = build(load_config(REPO / CONFIG_NAME))
    known = known_of(peers)
    assert {k.reader for k in known} == {"netcdf-c-4.9", "ncks", "zarrita", "zarr-python-2.18", "zarr-python-3.4"}
    for peer in peers:
        assert all(k.where.startswith(str(REPO / "adapters")) for k in known_of([peer])), peer.id
    # the built-in peers' own entries name none of them but through a flavor
    builtin = known_of(implementations.BUILT_IN)
    assert builtin and not {k.reader for k in builtin} & {p.id for p in peers}


BAD_ENTRIES = [
    ('colour = "red"\n', "known entry 1: unknown key 'colour'; known: cases, evidence, reader, side, why, writer"),
    ('cases = ["char-vr"]\n', "known entry 1: unknown case id 'char-vr'"),
    ('evidence = { kind = "looks_right" }\n', "known entry 1: unknown evidence kind 'looks_right'; known: "),
    ('evidence = { kind = "same_as_writer", writr = "zarr-python" }\n',
     "known entry 1: evidence same_as_writer: unknown parameter 'writr'; known: writer, flavor"),
    ('evidence = { kind = "same_as_writer" }\n',
     "known entry 1: evidence same_as_writer: name the reference by writer or by flavor (one of them)"),
    ('reader = "zarr-python"\n', "known entry 1: t declares its own faults only: a writer-side entry's reader is t, "
                                 "not zarr-python"),
]
ENTRY = {"writer": '"ours"', "cases": '["char-var"]', "why": '"a fault"',
         "evidence": '{ kind = "same_as_writer", writer = "zarr-python" }'}


def _entry(change: str) -> str:
    keys = dict(ENTRY)
    extra = ""
    for line in change.splitlines():
        key = line.split(" = ", 1)[0]
        if key in keys:
            keys[key] = line.split(" = ", 1)[1]
        else:
            extra += line + "\n"
    return "[[known]]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items()) + extra


@pytest.mark.parametrize(("change", "line"), BAD_ENTRIES)
def test_a_bad_known_entry_is_one_line_exit_2_naming_file_and_entry(change, line, capsys, tmp_path, monkeypatch):
    """Refused before any cell runs."""
    monkeypatch.setattr(matrix_module, "run_matrix", lambda *a, **kw: pytest.fail("the matrix ran"))
    (tmp_path / "known.toml").write_text(_entry(change), encoding="utf-8")
    config = tmp_path / "c.toml"
    config.write_text("[implementations.t]\nreader = 'tool {url}'\nknown = 'known.toml'\n", encoding="utf-8")
    assert report_cli.main(["report", "--config", str(config), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"nczarr-conformance: {tmp_path / 'known.toml'}: {line}"), err
    assert not (tmp_path / "out").exists()


def test_an_entry_declared_twice_is_refused_naming_both(capsys, tmp_path, monkeypatch):
    """Inline in the config too: the config's table is named."""
    monkeypatch.setattr(matrix_module, "run_matrix", lambda *a, **kw: pytest.fail("the matrix ran"))
    config = tmp_path / "c.toml"
    evidence = "evidence = { kind = 'message_is', text = 'x' }"
    entry = f"{{ writer = 'ours', cases = ['char-var', 'scalar'], why = 'w', {evidence} }}"
    again = f"{{ writer = 'ours', cases = ['scalar'], why = 'w', {evidence} }}"
    config.write_text(f"[implementations.t]\nreader = 'tool {{url}}'\nknown = [{entry}, {again}]\n", encoding="utf-8")
    assert report_cli.main(["report", "--config", str(config), "--out", str(tmp_path / "out")]) == 2
    where = f"{config} [implementations.t]"
    assert capsys.readouterr().err == (f"nczarr-conformance: {where}: known entry 2: writer-side scalar: ours → t "
                                       f"declared twice: first by {where}: known entry 1\n")


def test_a_good_entry_loads_with_its_defaults(tmp_path):
    (tmp_path / "known.toml").write_text(_entry(""), encoding="utf-8")
    config = tmp_path / "c.toml"
    config.write_text("[implementations.t]\nreader = 'tool {url}'\nknown = 'known.toml'\n", encoding="utf-8")
    (k,) = known_of(build(load_config(config)))
    assert (k.key, k.why) == (("writer", "char-var", "ours", "t"), "a fault")


def test_evidence_kinds_are_a_registry_that_refuses_a_name_twice():
    assert {"same_as_writer", "within_writer", "same_as_reader", "message_is", "same_paths_as_writer",
            "same_errors_as_writer", "shows_410_keys_like", "ignores_keys"} <= set(EVIDENCE)
    with pytest.raises(DuplicateIdError, match="evidence kind 'same_as_writer' registered twice"):
        evidence_kind("same_as_writer", writer=str)(lambda writer: (lambda run, cell: None))


class _Plugin(Peer):
    """A plugin's peer declaring its pinned faults the way a config does, on the Peer itself."""
    id, reads, source = "plug-reader-ncz37", True, "entry point plug"
    known = ({"writer": "ours", "cases": ["scalar"], "why": "plug reads no scalar",
              "evidence": {"kind": "message_is", "text": "no scalars"}},)

    def read(self, url):
        raise NotImplementedError


def test_a_plugins_known_faults_join_the_gate():
    with registered([_Plugin()]):
        (k,) = [k for k in gate.known_entries() if k.reader == "plug-reader-ncz37"]
    assert k.where == "entry point plug: known entry 1"
    assert not [k for k in gate.known_entries() if k.reader == "plug-reader-ncz37"]


class _FlavorWriter(Peer):
    id, writes, flavor = "upper-writer-ncz37", True, "nczarr-2-upper"

    def read(self, url):
        raise NotImplementedError


def test_a_reference_named_by_flavor_is_the_writer_of_that_flavor_or_unchecked():
    """netcdf-c 4.10's faults on the 4.8-4.9.0 layout name their reference by flavor: the run's writer of that
    layout (not ours) when there is one, and no evidence to check when there is none."""
    check = make_evidence({"kind": "same_as_writer", "flavor": "nczarr-2-upper"})
    ours = Cell("char-var", "ours-nczarr-2-upper", "netcdf-c-4.10", "fails", [], "NetCDF: HDF error")
    theirs = Cell("char-var", "upper-writer-ncz37", "netcdf-c-4.10", "fails", [], "NetCDF: HDF error")
    with registered([_FlavorWriter()]):
        run = MatrixRun([{"id": "ours-nczarr-2-upper"}, {"id": "upper-writer-ncz37"}, {"id": "netcdf-c-4.10"}],
                        [ours, theirs], {}, Path("/nonexistent"))
        assert check(run, ours) is None
        theirs.message = "NetCDF: something else"
        assert check(run, ours) == ("upper-writer-ncz37 → netcdf-c-4.10 is not the same as ours: fails NetCDF: "
                                    "something else")
    alone = MatrixRun([{"id": "ours-nczarr-2-upper"}, {"id": "netcdf-c-4.10"}], [ours], {}, Path("/nonexistent"))
    assert check(alone, ours) is None


def test_built_in_peers_are_one_module_each_registered_once():
    """implementations.py only lists them; each comes from a module of its own (a family: a v3 writer beside its
    v2 parent), and registering one again is refused naming its module."""
    modules: dict[str, set[type]] = {}
    for peer in implementations.BUILT_IN:
        assert PEERS[peer.id] is peer
        modules.setdefault(type(peer).__module__, set()).add(type(peer))
    assert "nczarr_conformance.peers.implementations" not in modules
    for module, classes in modules.items():
        roots = {c for c in classes if not any(issubclass(c, o) and c is not o for o in classes)}
        assert len(roots) == 1, (module, roots)
    with pytest.raises(DuplicateIdError, match=re.escape("peer id 'gdal' registered twice: first by "
                                                         "nczarr_conformance.peers.gdal_peer, again by "
                                                         "nczarr_conformance.peers.gdal_peer")):
        register(type(PEERS["gdal"])())


def test_a_usage_error_in_known_data_is_not_a_traceback():
    with pytest.raises(UsageError):
        known_of([_Plugin(), _Plugin()])
