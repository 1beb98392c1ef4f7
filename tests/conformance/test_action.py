"""The composite GitHub Action (action.yml): its inputs and outputs are the documented ones, it leaves the
workflow's PATH alone, and its shell steps, run here as the runner would run them, install what ``version``
says, grade a reader with the interpreter PATH names, and count the outcomes into the step outputs.

There is no runner here: the steps' ``env`` expressions (``${{ inputs.X }}``, ``${{ steps.ID.outputs.X }}``,
``${{ toJSON(inputs) }}``) are filled in by :func:`expand`, and the ``run`` scripts go to bash with the
variables the runner sets (``GITHUB_OUTPUT``, ``RUNNER_TEMP``, ``GITHUB_JOB``, ``GITHUB_ACTION_PATH``).
``actions/setup-python`` is not run: its ``python-path`` output is a stand-in interpreter whose ``-m venv``
makes a directory with a ``python`` that records ``-m pip`` calls instead of installing, and runs anything
else with this interpreter (the suite under test). The counts expected are pytest's own summary line's.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
STEPS = {step.get("id"): step for step in ACTION["runs"]["steps"]}
DOCS = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")

#: stands in for another project's reader (tests/conformance/test_pytest_plugin.py's): it misreads the scalar
#: case's d (2.5 in the case) as 3.5, and records which interpreter ran it
READER = textwrap.dedent('''\
    import json, os, sys
    from nczarr_conformance import open_dataset
    with open(os.environ["NCZ_TEST_RAN_WITH"], "a") as f:
        f.write(os.environ.get("NCZ_TEST_WORKFLOW_PYTHON", "not the workflow's python") + "\\n")
    doc = open_dataset(sys.argv[1]).to_json()
    variables = doc["root"]["variables"]
    if set(variables) == {"d", "i"} and variables["d"]["shape"] == []:
        variables["d"]["data"] = 3.5
    json.dump(doc, sys.stdout)
''')


def documented(kind: str) -> list[str]:
    """The names in the first column of docs/plugins.md's table headed ``| kind |``."""
    table = DOCS.split(f"\n| {kind} |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `([a-z-]+)` \|", table, flags=re.MULTILINE)


def test_inputs_and_outputs_are_the_documented_ones():
    assert list(ACTION["inputs"]) == documented("input")
    assert list(ACTION["outputs"]) == documented("output")
    for name, spec in ACTION["inputs"].items():
        row = next(line for line in DOCS.splitlines() if line.startswith(f"| `{name}` |"))
        default = row.split("|")[2].strip().strip("`")
        assert default == spec["default"], (name, default, spec["default"])


def test_setup_python_leaves_path_alone_and_no_step_changes_it():
    """setup-python's default puts its interpreter first on PATH for the rest of the job, so a reader command
    ``python my_reader.py`` lost the workflow's packages: the action's interpreter must stay off PATH."""
    setup = STEPS["python"]
    assert setup["uses"].startswith("actions/setup-python@")
    assert setup["with"]["update-environment"] in (False, "false")
    for step in ACTION["runs"]["steps"]:
        assert "GITHUB_PATH" not in step.get("run", "") and "activate" not in step.get("run", ""), step


def expand(value: str, inputs: dict[str, str], outputs: dict[str, dict[str, str]]) -> str:
    """A step's ``${{ … }}`` expressions, the few this action uses."""
    def one(match: re.Match[str]) -> str:
        expr = match.group(1).strip()
        if expr == "toJSON(inputs)":
            return json.dumps(inputs, indent=2)
        if expr.startswith("inputs."):
            return inputs[expr.removeprefix("inputs.")]
        step, _, name = expr.removeprefix("steps.").partition(".outputs.")
        return outputs.get(step, {}).get(name, "")
    return re.sub(r"\$\{\{(.+?)\}\}", one, value)


FAKE_BASE_PYTHON = textwrap.dedent('''\
    #!/bin/sh
    # setup-python's interpreter, for `-m venv DIR` only: DIR/bin/python records pip calls, runs the rest
    [ "$1 $2" = "-m venv" ] || exit 64
    mkdir -p "$3/bin"
    cat > "$3/bin/python" <<EOF
    #!/bin/sh
    if [ "\\$1 \\$2" = "-m pip" ]; then shift 2; echo "\\$*" >> "$3/pip-calls"; exit 0; fi
    exec "{python}" "\\$@"
    EOF
    chmod +x "$3/bin/python"
''')


class Runner:
    """Runs the action's shell steps in order, as a runner would, for one use of the action."""

    def __init__(self, work: Path, **given: str) -> None:
        self.work = work
        self.inputs = {name: spec["default"] for name, spec in ACTION["inputs"].items()} | given
        self.outputs: dict[str, dict[str, str]] = {"python": {"python-path": str(work / "base-python")}}
        (work / "base-python").write_text(FAKE_BASE_PYTHON.replace("{python}", sys.executable), encoding="utf-8")
        (work / "base-python").chmod(0o755)
        (work / "temp").mkdir(exist_ok=True)
        # the workflow's own `python`, first on PATH: a wrapper that says so to the reader
        bin_dir = work / "workflow-bin"
        bin_dir.mkdir(exist_ok=True)
        wrapper = bin_dir / "python"
        wrapper.write_text(f'#!/bin/sh\nNCZ_TEST_WORKFLOW_PYTHON=yes exec "{sys.executable}" "$@"\n', encoding="utf-8")
        wrapper.chmod(0o755)
        self.path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"

    def step(self, step_id: str) -> subprocess.CompletedProcess[str]:
        step = STEPS[step_id]
        output = self.work / f"output-{step_id}"
        output.write_text("", encoding="utf-8")
        env = {**os.environ, "PATH": self.path, "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(self.work / "temp"),
               "GITHUB_JOB": "conformance", "GITHUB_ACTION_PATH": str(REPO),
               "PYTHONPATH": str(REPO), "NCZ_TEST_RAN_WITH": str(self.work / "ran-with")}
        env |= {k: expand(str(v), self.inputs, self.outputs) for k, v in step.get("env", {}).items()}
        done = subprocess.run([shutil.which("bash") or "bash", "-e", "-c", step["run"]], cwd=self.work, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        self.outputs[step_id] = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        return done


@pytest.mark.parametrize("version,requirement", [
    ("", str(REPO)), ("0.2.0", "nczarr-conformance==0.2.0"),
    ("git+https://example.org/ncz.git@v1", "git+https://example.org/ncz.git@v1")])
def test_install_takes_the_pinned_version_or_the_actions_own_checkout(tmp_path, version, requirement):
    runner = Runner(tmp_path, version=version)
    done = runner.step("install")
    assert done.returncode == 0, done.stderr
    venv_python = Path(runner.outputs["install"]["python"])
    assert (venv_python.parent.parent / "pip-calls").read_text().split("\n")[0].split()[-2:] == ["pytest", requirement]


def test_artifact_names_differ_between_two_uses_in_one_job_and_follow_the_input(tmp_path):
    names = []
    for reader in ("tool-a {path}", "tool-b {path}"):
        runner = Runner(tmp_path, reader=reader)
        assert runner.step("install").returncode == 0
        names.append(runner.outputs["install"]["artifact-name"])
    assert names[0] != names[1] and all(n.startswith("nczarr-conformance-conformance-") for n in names), names
    runner = Runner(tmp_path, reader="tool-a {path}", **{"artifact-name": "mine"})
    assert runner.step("install").returncode == 0
    assert runner.outputs["install"]["artifact-name"] == "mine"
    assert STEPS[None]["with"]["name"] == "${{ steps.install.outputs.artifact-name }}"  # the upload step's


@pytest.mark.peer
def test_a_reader_runs_with_the_workflows_python_and_the_counts_become_outputs(tmp_path):
    (tmp_path / "reader.py").write_text(READER, encoding="utf-8")
    runner = Runner(tmp_path, reader="python reader.py {path}", cases="scalar,string-var",
                    caps="nczarr,attributes,scalars", **{"fail-on-skip": "true"})
    assert runner.step("install").returncode == 0
    cases = runner.step("cases")
    assert cases.returncode == 1, cases.stdout + cases.stderr  # the planted misreading
    assert "1 failed, 1 skipped" in cases.stdout, cases.stdout  # pytest's own count
    assert (tmp_path / "ran-with").read_text().split() == ["yes"]  # the reader ran once, with PATH's python
    counts = runner.step("counts")
    assert counts.returncode == 3, counts.stdout + counts.stderr  # fail-on-skip: string-var needs strings
    assert runner.outputs["counts"] == {"passed": "0", "failed": "1", "xfailed": "0", "skipped": "1",
                                        "report": "nczarr-conformance.xml"}
    assert (tmp_path / "nczarr-conformance.xml").exists()
    runner.inputs["fail-on-skip"] = "false"
    assert runner.step("counts").returncode == 0


def test_counts_of_a_missing_or_foreign_file_are_one_line_exit_2(tmp_path):
    (tmp_path / "other.xml").write_text("<html/>", encoding="utf-8")
    for name, words in (("absent.xml", "cannot read the JUnit file"), ("other.xml", "not JUnit XML")):
        done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.action_outputs", str(tmp_path / name)],
                              capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and words in done.stderr and name in done.stderr, done.stderr


def test_counts_are_pytests_own_for_every_outcome(tmp_path):
    """pytest's JUnit file of one test per outcome (an error in a fixture counts as failed): the counts are
    the ones pytest's summary line gives."""
    from nczarr_conformance.conformance.junit import count

    (tmp_path / "test_outcomes.py").write_text(textwrap.dedent('''\
        import pytest
        @pytest.fixture
        def broken():
            raise RuntimeError("setup")
        def test_pass(): pass
        def test_pass_too(): pass
        def test_fail(): assert False
        def test_error(broken): pass
        @pytest.mark.xfail(strict=True)
        def test_xfail(): assert False
        def test_skip(): pytest.skip("why")
    '''), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "--junitxml=out.xml", "test_outcomes.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False)
    assert "1 failed, 2 passed, 1 skipped, 1 xfailed, 1 error" in done.stdout, done.stdout
    assert count((tmp_path / "out.xml").read_text()) == {"passed": 2, "failed": 2, "xfailed": 1, "skipped": 1}
