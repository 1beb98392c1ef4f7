"""cdl_parse.py is how the matrix reads netcdf-c 4.9.0 (``ncdump``'s CDL), so its parse is checked
against a reader that shares no code with it: ``ncgen -k nc4`` (4.9.0) builds an HDF5 file from a
CDL text, and what we parse from ``ncdump -p 9,17`` of that file must equal what netCDF4-python
and h5py read from the same file (testing/source.py). ncdump prints no storage without ``-s``, so
only the content compares."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nczarr_conformance.cdl.parse import parse_cdl
from nczarr_conformance.model import diff
from nczarr_conformance.testing.ignores import CDL_STATES_NO_STORAGE
from nczarr_conformance.testing.source import read_source
from tests.conftest import NETCDF_C_CORPUS, require_tool
from tests.peers.known import PeerStillWrong, still_wrong

pytestmark = pytest.mark.peer

#: every type, fills, NaN and infinities, escapes, non-ASCII and JSON-looking text, groups, unlimited
HAND_WRITTEN = r"""netcdf every_type {
dimensions:
	x = 3 ;
	t = UNLIMITED ; // (2 currently)
variables:
	byte b(x) ;
		b:_FillValue = -7b ;
	ubyte ub(x) ;
	short s(t) ;
	ushort us(x) ;
	int i(x) ;
		i:valid_range = -2147483647, 2147483647 ;
	uint ui(x) ;
	int64 i64(x) ;
	uint64 u64(x) ;
		u64:big = 18446744073709551615ULL ;
	float f(x) ;
		f:_FillValue = NaNf ;
	double d(t, x) ;
		d:pi = 3.141592653589793 ;
		d:tiny = 4.9406564584124654e-324 ;
	char c(x) ;
		c:_FillValue = "z" ;
	string str(x) ;
		str:_FillValue = "fill" ;
	char word ;
	double sc ;

// global attributes:
		:json = "{\"a\": [1, 2]}" ;
		:accents = "héllo wörld" ;
		:cjk = "日本語" ;
		:escapes = "tab\there\nnew \"quoted\" back\\slash" ;
		string :several = "a", "", "é" ;
data:

 b = -128, _, 127 ;
 ub = 0, 255, 1 ;
 s = -32768, 32767 ;
 us = 0, 65535, 7 ;
 i = -2147483647, 0, 2147483647 ;
 ui = 0, 4294967295, 1 ;
 i64 = -9223372036854775807, 0, 9223372036854775807 ;
 u64 = 0, 18446744073709551615, 1 ;
 f = 1.00000012f, _, -Infinityf ;
 d = 1, 2, 3, NaN, Infinity, -0. ;
 c = "\000é" ;
 str = "日本語", _, "" ;
 word = "w" ;
 sc = 2.5 ;

group: g {
  dimensions:
  	y = 2 ;
  variables:
  	float v(y, x) ;
  		v:units = "m" ;
  data:

   v = 1, 2, 3, 4, 5, 6 ;
  } // group g
}
"""  # noqa: E101 - as ncdump prints a group: its lines indented with spaces, then tabs


def _cross_check(cdl: Path, tmp_path: Path) -> list[str]:
    nc = tmp_path / "built.nc"
    built = subprocess.run([require_tool("ncgen"), "-k", "nc4", "-b", "-o", str(nc), str(cdl)], capture_output=True,
                           text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    dumped = subprocess.run([require_tool("ncdump"), "-p", "9,17", str(nc)], capture_output=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr
    parsed = parse_cdl(dumped.stdout.decode("utf-8", "surrogateescape"))[1]
    return diff(read_source(str(nc)), parsed, ignore=CDL_STATES_NO_STORAGE)


def test_hand_written_cdl_parses_as_netcdf4_python_reads_it(tmp_path):
    cdl = tmp_path / "every_type.cdl"
    cdl.write_text(HAND_WRITTEN, encoding="utf-8")
    assert _cross_check(cdl, tmp_path) == []


#: ref_byte.cdl is not CDL ncgen 4.9.0 takes (tests/test_cdl_baselines.py pins that failure)
BUILDABLE = sorted(p.name for p in NETCDF_C_CORPUS.glob("ref_*.cdl") if p.name != "ref_byte.cdl")


@pytest.mark.parametrize("name", BUILDABLE)
def test_corpus_cdl_parses_as_netcdf4_python_reads_it(name, tmp_path):
    assert _cross_check(NETCDF_C_CORPUS / name, tmp_path) == []


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="ncdump 4.9.0 prints a NUL char _FillValue as \"\" "
                                                               "(C string end): the NUL is lost in its CDL")
def test_known_deviation_ncdump_490_prints_nul_char_fill_empty(tmp_path):
    cdl = tmp_path / "nul.cdl"
    cdl.write_text('netcdf nul {\ndimensions:\n\tx = 1 ;\nvariables:\n\tchar c(x) ;\n\t\tc:_FillValue = "\\000" ;\n}\n')
    nc = tmp_path / "nul.nc"
    subprocess.run([require_tool("ncgen"), "-k", "nc4", "-b", "-o", str(nc), str(cdl)], check=True, timeout=120)
    assert read_source(str(nc)).root.variables["c"].attributes["_FillValue"].value == "\x00"  # stored right
    printed = subprocess.run([require_tool("ncdump"), "-h", str(nc)], capture_output=True, text=True, check=True,
                             timeout=120).stdout
    seen = [line.strip() for line in printed.splitlines() if "_FillValue" in line]
    still_wrong(seen, wrong=['c:_FillValue = "" ;'], right=['c:_FillValue = "\\000" ;'])
