"""``python -m nczarr_conformance.cli.action_outputs JUNIT.xml``: the counts of a conformance run, for CI.

The GitHub Action (action.yml) runs it after the cases: it counts the JUnit file's outcomes (passed, failed,
xfailed, skipped: conformance/junit.py ``count``), prints them on one line, appends them as ``NAME=N`` lines
(and ``report=PATH``) to ``--github-output FILE`` (``$GITHUB_OUTPUT``: the step's outputs), and with
``--fail-on-skip`` exits 3 when a case was skipped. It runs with the interpreter that ran the cases, not
the workflow's, so it needs nothing the workflow installed.

Exit codes: 0 counted, 2 the file is missing or not JUnit XML (one line naming it), 3 ``--fail-on-skip``
and some case was skipped.
"""
from __future__ import annotations

import sys
from pathlib import Path

from nczarr_conformance.cli.common import Parser, run
from nczarr_conformance.errors import UsageError

EXIT_SKIPPED = 3


def build_parser() -> Parser:
    p = Parser(prog="nczarr-conformance-action-outputs", description=__doc__.splitlines()[0])
    p.add_argument("junit", help="the JUnit XML of the run (pytest --junitxml, or report --junit)")
    p.add_argument("--github-output", metavar="FILE", help="append NAME=VALUE lines here ($GITHUB_OUTPUT)")
    p.add_argument("--fail-on-skip", action="store_true", help=f"exit {EXIT_SKIPPED} when a case was skipped")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        from nczarr_conformance.conformance.junit import OUTCOMES, count

        path = Path(args.junit)
        try:
            counts = count(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"{path}: cannot read the JUnit file: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise UsageError(f"{path}: {exc}") from None
        print("nczarr-conformance: " + ", ".join(f"{counts[k]} {k}" for k in OUTCOMES) + f" ({path})")
        if args.github_output:
            lines = [f"{k}={counts[k]}" for k in OUTCOMES] + [f"report={path}"]
            with open(args.github_output, "a", encoding="utf-8") as out:
                out.write("".join(line + "\n" for line in lines))
        if args.fail_on_skip and counts["skipped"]:
            print(f"nczarr-conformance: fail-on-skip: {counts['skipped']} cases skipped", file=sys.stderr)
            return EXIT_SKIPPED
        return 0

    return run("nczarr-conformance", body)


if __name__ == "__main__":
    from nczarr_conformance.cli.ending import exit_process

    exit_process(main())
