"""The pytest plugin, as another project uses it: a checkout outside ours with nothing but a reader command,
``pytest --nczarr-reader=…`` collects one test per case; a planted misreading fails with the canonical diff."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO

PLUGIN = "nczarr_conformance.conformance.pytest_plugin"

#: stands in for another project's reader: any language would do (the command contract, docs/plugins.md);
#: it misreads the scalar case's d (2.5 in the case) as 3.5, the planted fault the test must report
READER = textwrap.dedent('''\
    import json, sys
    from nczarr_conformance import open_dataset
    doc = open_dataset(sys.argv[1]).to_json()
    variables = doc["root"]["variables"]
    if set(variables) == {"d", "i"} and variables["d"]["shape"] == []:
        variables["d"]["data"] = 3.5
    json.dump(doc, sys.stdout)
''')


def run_pytest(project, *args):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", PLUGIN, "-p", "no:cacheprovider", "-q", *args],
                          check=False, cwd=project, env=env, capture_output=True, text=True, timeout=120)


def test_one_test_per_case_a_pass_and_a_planted_failure_with_the_sided_diff(tmp_path):
    project = tmp_path / "other-project"
    project.mkdir()
    (project / "reader.py").write_text(READER, encoding="utf-8")
    done = run_pytest(project, f"--nczarr-reader={sys.executable} reader.py {{path}}", "-k", "scalar or typed")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "FAILED ::nczarr-conformance::read[scalar]" in out, out
    assert "/root/variables/d/data: writer was given 2.5 / reader read 3.5" in out, out


def test_collects_every_case_and_nothing_without_the_options(tmp_path):
    (tmp_path / "reader.py").write_text(READER, encoding="utf-8")
    listed = run_pytest(tmp_path, f"--nczarr-reader={sys.executable} reader.py {{path}}", "--collect-only")
    from nczarr_conformance.conformance.cases import CASES
    names = [line for line in listed.stdout.splitlines() if "read[" in line]
    assert len(names) == len(CASES), listed.stdout + listed.stderr
    plain = run_pytest(tmp_path, "--collect-only")
    assert "read[" not in plain.stdout and plain.returncode == 5, plain.stdout + plain.stderr  # 5: no tests


def test_nczarr_cases_chooses_by_glob_and_refuses_a_pattern_matching_none(tmp_path):
    (tmp_path / "reader.py").write_text(READER, encoding="utf-8")
    reader = f"--nczarr-reader={sys.executable} reader.py {{path}}"
    listed = run_pytest(tmp_path, reader, "--nczarr-cases=scalar,corpus-ref_old*", "--collect-only")
    names = sorted(line.strip() for line in listed.stdout.splitlines() if "read[" in line)
    expected = ["corpus-ref_oldformat", "corpus-ref_oldkeys", "scalar"]
    assert names == [f"::nczarr-conformance::read[{c}]" for c in expected], listed.stdout + listed.stderr
    refused = run_pytest(tmp_path, reader, "--nczarr-cases=scalar,nope*", "--collect-only")
    assert refused.returncode == 4, refused.stdout + refused.stderr  # pytest's usage error
    assert "--nczarr-cases 'nope*' matches no case; known: numeric-types," in refused.stderr, refused.stderr
