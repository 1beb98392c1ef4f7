"""docs/rules.md, generated from the rule registry: ``python -m nczarr_conformance.check.docs > docs/rules.md``."""
from __future__ import annotations

import sys

from . import RULES

HEADER = """# nczarr-check rules

One line per rule: its stable id, its severity, what it checks and what it stands on.
Generated from the registry (`python -m nczarr_conformance.check.docs > docs/rules.md`);
a test fails if this file is stale. Rules marked *deep* run with `--deep` only.

| rule | severity | checks |
|---|---|---|
"""


def render() -> str:
    rows = [f"| `{r.id}` | {r.severity}{' (deep)' if r.deep else ''} | {r.description.replace('|', chr(92) + '|')} |"
            for r in sorted(RULES.values(), key=lambda r: r.id)]
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
