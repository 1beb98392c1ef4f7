"""netcdf-c's CDL baselines, built into NCZarr stores by ncgen 4.9.0, through our CDL dump.

Two comparisons per baseline: our dump equals what ncdump 4.9.0 reads from the same store (we
read what netcdf-c reads), and our dump equals the baseline itself, except where ncgen 4.9.0
wrote something else than the baseline says (pinned as strict xfails with the reason). Where
ncgen 4.9.0 cannot build a baseline, or ncdump 4.9.0 cannot read what it built, the test is a
strict xfail that asserts that exact failure (tests/peers/known.py): a fixed peer turns it red.
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from nczarr_conformance.cdl.parse import parse_cdl, storage_stated
from nczarr_conformance.cli import dump
from nczarr_conformance.model import STORAGE_FIELDS, diff
from nczarr_conformance.testing.ignores import CDL_STATES_NO_STORAGE
from tests.conftest import NETCDF_C_CORPUS, require_tool
from tests.in_process import run_main
from tests.peers.known import PeerStillWrong, still_wrong

pytestmark = pytest.mark.peer
BASELINES = sorted(p.name for p in NETCDF_C_CORPUS.glob("ref_*.cdl"))


def _ncdump_data_lines(store: Path) -> list[str]:
    """The ``:data = …`` lines ncdump 4.9.0 prints for the store (its own text, no parser of ours)."""
    done = subprocess.run([require_tool("ncdump"), f"file://{store}#mode=nczarr,file"], capture_output=True, text=True,
                          timeout=120, check=True)
    return [line.strip() for line in done.stdout.splitlines() if line.strip().startswith(":data = ")]


def _baseline_data_lines(name: str) -> list[str]:
    text = (NETCDF_C_CORPUS / name).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip().startswith(":data = ")]


def _json_object_round_trip(name: str, store: Path):
    right = _baseline_data_lines(name)
    return _ncdump_data_lines(store), [line.replace(',\\"', ', \\"') for line in right], right


def _stored(store: Path, key: str) -> dict:
    return json.loads((store / key).read_text(encoding="utf-8"))


def _nul_char_types(name: str, store: Path):
    types = _stored(store, "test/.zattrs")["_NCZARR_ATTR"]["types"]
    return [types["nul0"], types["nul_sng"]], ["<i1", "<i1"], ["<U1", "<U1"]


def _default_double_fill(name: str, store: Path):
    return _stored(store, "time/.zarray")["fill_value"], 9.96921e+36, 9.969209968386869e+36


def _line(path: str, baseline: object, built: object) -> str:
    """A difference as the model diff prints it: ``path: <baseline's value> != <the value in ncgen's store>``."""
    return f"{path}: {json.dumps(baseline)[:200]} != {json.dumps(built)[:200]}"


def _respaced(values: dict[str, str]) -> list[str]:
    """The baseline's JSON text of each attribute against netcdf-c 4.9.0's re-serialisation (", " after commas)."""
    return [_line(path, text, text.replace(',"', ', "')) for path, text in values.items()]


NCZARR = '{"zarr_format": 2,"nczarr_version": "1.0.0"}'  # the baselines' own text (ref_t_meta_*.cdl :data)
NC_FILL_DOUBLE, PERCENT_G = 9.969209968386869e+36, 9.96921e+36

#: baseline → (reason, what netcdf-c 4.9.0 built instead: (seen, wrong, right) from its own output, and exactly
#: how our dump of its store differs from the baseline because of it: each path with both values)
NCGEN_WRITES_OTHERWISE = {
    "ref_t_meta_dim1.cdl": ("netcdf-c 4.9.0 stores a JSON-object char attribute as JSON (Appendix D case 3) and "
                            "prints it re-serialised with ', ': the baseline's text is not kept",
                            _json_object_round_trip,
                            _respaced({"/root/groups/_nczarr/attributes/data/value": NCZARR,
                                       "/root/groups/_nczgroup/attributes/data/value":
                                           '{"dimensions": {"dim1": 1},"arrays": [],"groups": []}'})),
    "ref_t_meta_var1.cdl": ("netcdf-c 4.9.0 stores a JSON-object char attribute as JSON (Appendix D case 3) and "
                            "prints it re-serialised with ', ': the baseline's text is not kept",
                            _json_object_round_trip,
                            _respaced({"/root/groups/_nczarr/attributes/data/value": NCZARR,
                                       "/root/groups/_nczgroup/attributes/data/value":
                                           '{"dimensions": {},"arrays": ["var1"],"groups": []}',
                                       "/root/groups/var1/groups/_nczvar/attributes/data/value":
                                           '{"dimension_references": [],"contiguous": true}',
                                       "/root/groups/var1/groups/_zarray/attributes/data/value":
                                           '{"zarr_format": 2,"shape": [],"dtype": "<i4","chunks": [],'
                                           '"fill_value": -2147483647,"order": "C","compressor": null,'
                                           '"filters": null}'})),
    "ref_nulls.cdl": ("ncgen 4.9.0 stores the char constant '\\0' as the byte 48 (the code of '0'), typed <i1",
                      _nul_char_types,
                      [_line(f"/root/variables/test/attributes/{name}/{field}", baseline, built)
                       for name in ("nul0", "nul_sng") for field, baseline, built in (("type", "char", "byte"),
                                                                                       ("value", "\0", [48]))]),
    "ref_perdimspecs.cdl": ("ncgen 4.9.0 stores the default double fill as fill_value 9.96921e+36 (printf %g), so "
                            "unwritten cells read as 9.96921e+36, not NC_FILL_DOUBLE 9.969209968386869e+36",
                            _default_double_fill,
                            # time = 40 in the baseline, never written: every cell reads the fill
                            [_line(f"/root/variables/time/data[{i}]", NC_FILL_DOUBLE, PERCENT_G) for i in range(40)]),
}


#: baseline → ncgen 4.9.0's exact first stderr line (exit 1) when it cannot build the store
NCGEN_CANNOT_BUILD = {
    "ref_byte.cdl": "ncgen: <corpus>/ref_byte.cdl line 5: syntax error, unexpected '(', expecting ':'",
    "ref_newformatpure.cdl": "ncgen: NetCDF: NCZarr error",
    "ref_string.cdl": "ncgen: NetCDF: NCZarr error",
}
#: baseline → ncdump 4.9.0's exit code on the store its own ncgen built (-11: SIGSEGV)
NCDUMP_CANNOT_READ = {"ref_nulls.cdl": -11, "ref_scalar.cdl": -11, "ref_scalar_nczarr.cdl": -11}


#: what ncgen 4.9.0 did with a baseline: its exit code, its first stderr line (the corpus path as <corpus>), the store
Built = tuple[int, str, Path]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Built]:
    """ncgen 4.9.0 run once per baseline, its store shared by the three tests that read it (none writes to it)."""
    done: dict[str, Built] = {}

    def build(name: str) -> Built:
        if name not in done:
            where = tmp_path_factory.mktemp(name.removesuffix(".cdl"))
            ran = subprocess.run([require_tool("ncgen"), "-4", "-b", "-o", f"file://{where}/b.file#mode=nczarr,file",
                                  str(NETCDF_C_CORPUS / name)], capture_output=True, text=True, timeout=120)
            first = (ran.stderr.strip().splitlines() or [""])[0].replace(str(NETCDF_C_CORPUS), "<corpus>")
            done[name] = (ran.returncode, first, where / "b.file")
        return done[name]

    return build


def _build(name: str, built: Callable[[str], Built], request: pytest.FixtureRequest) -> Path:
    returncode, first, store = built(name)
    if name in NCGEN_CANNOT_BUILD:
        request.applymarker(pytest.mark.xfail(strict=True, raises=PeerStillWrong,
                                              reason=f"ncgen 4.9.0 exits 1: {NCGEN_CANNOT_BUILD[name]}"))
        still_wrong((returncode, first), wrong=(1, NCGEN_CANNOT_BUILD[name]), right=(0, ""))
    assert returncode == 0, first
    return store


def _our_dump_text(store: Path, *flags: str) -> str:
    """nczarr-dump's output, its ``main(argv)`` run in this process (tests/in_process.py): the text is what is
    compared here, not the command's start-up (tests/cli/ starts it)."""
    dumped = run_main(dump.main, [*flags, str(store)])
    assert dumped.returncode == 0, dumped.stderr
    return dumped.stdout


def _our_dump(store: Path, *flags: str):
    return parse_cdl(_our_dump_text(store, *flags))[1]


def _ignoring_unstated(*texts: str) -> dict[str, str]:
    """Storage fields not stated by every text (ncdump -s facts), each with the reason it is not compared."""
    stated = frozenset.intersection(*(storage_stated(t) for t in texts))
    return {f: why for f, why in CDL_STATES_NO_STORAGE.items() if f not in stated} | \
        {f: "ncdump -s does not state it" for f in STORAGE_FIELDS - stated - set(CDL_STATES_NO_STORAGE)}


@pytest.mark.parametrize("name", BASELINES)
def test_our_dump_equals_ncdump_490(name, built, request):
    store = _build(name, built, request)
    theirs = subprocess.run([require_tool("ncdump"), "-p", "9,17", f"file://{store}#mode=nczarr,file"],
                            capture_output=True, timeout=120)
    if name in NCDUMP_CANNOT_READ:
        request.applymarker(pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason=f"ncdump 4.9.0 exits "
                                              f"{NCDUMP_CANNOT_READ[name]} (SIGSEGV) on what its ncgen wrote"))
        still_wrong(theirs.returncode, wrong=NCDUMP_CANNOT_READ[name], right=0)
    assert theirs.returncode == 0, theirs.stderr
    assert diff(parse_cdl(theirs.stdout.decode("utf-8", "surrogateescape"))[1], _our_dump(store),
                ignore=CDL_STATES_NO_STORAGE) == []


@pytest.mark.parametrize("name", BASELINES)
def test_our_dump_s_states_the_storage_ncdump_490_states(name, built, request):
    """With -s both state storage: chunks, NOFILL and byte order compare (4.9.0 prints no NCZarr codecs)."""
    store = _build(name, built, request)
    theirs = subprocess.run([require_tool("ncdump"), "-s", "-p", "9,17", f"file://{store}#mode=nczarr,file"],
                            capture_output=True, timeout=120)
    if name in NCDUMP_CANNOT_READ:
        request.applymarker(pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason=f"ncdump 4.9.0 exits "
                                              f"{NCDUMP_CANNOT_READ[name]} (SIGSEGV) on what its ncgen wrote"))
        still_wrong(theirs.returncode, wrong=NCDUMP_CANNOT_READ[name], right=0)
    assert theirs.returncode == 0, theirs.stderr
    text, ours = theirs.stdout.decode("utf-8", "surrogateescape"), _our_dump_text(store, "-s")
    ignore = _ignoring_unstated(text, ours)
    theirs_model = parse_cdl(text)[1]
    if any(g.variables for _, g in theirs_model.root.walk()):  # what this test is for
        assert {"chunks", "no_fill"} <= STORAGE_FIELDS - set(ignore)
    assert diff(theirs_model, parse_cdl(ours)[1], ignore=ignore) == []


@pytest.mark.parametrize("name", BASELINES)
def test_our_dump_equals_the_baseline(name, built, request):
    """Where ncgen 4.9.0 built something else than the baseline, our dump differs from the baseline exactly
    there (asserted first, outside any xfail), and the strict xfail holds the peer's own output to its known
    wrong form."""
    store = _build(name, built, request)
    text = (NETCDF_C_CORPUS / name).read_text(encoding="utf-8")
    _, expected = parse_cdl(text)
    if storage_stated(text):  # a baseline ncdump -s printed: what it states about storage compares
        ours = _our_dump_text(store, "-s")
        differences = diff(expected, parse_cdl(ours)[1], ignore=_ignoring_unstated(text, ours))
    else:
        differences = diff(expected, _our_dump(store), ignore=CDL_STATES_NO_STORAGE)
    if name not in NCGEN_WRITES_OTHERWISE:
        assert differences == []
        return
    reason, peer_output, expected = NCGEN_WRITES_OTHERWISE[name]
    assert sorted(differences) == sorted(expected)  # each path with both values, not only where
    request.applymarker(pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason=reason))
    seen, wrong, right = peer_output(name, store)
    still_wrong(seen, wrong=wrong, right=right)
