"""Rendering of a check report as text or JSON (docs/contracts/check-report.md); no checking here."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .rules import Finding, Severity

REPORT_ID = "nczarr-check/1"


@dataclass
class Report:
    url: str
    flavor: str
    findings: list[Finding] = field(default_factory=list)
    objects_read: int = 0
    seconds: float = 0.0

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def exit_code(self) -> int:
        return 1 if self.count(Severity.ERROR) else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "report": REPORT_ID,
            "url": self.url,
            "flavor": self.flavor,
            "findings": [f.to_json() for f in self.findings],
            "summary": {"errors": self.count(Severity.ERROR), "warnings": self.count(Severity.WARNING),
                        "infos": self.count(Severity.INFO), "objects_read": self.objects_read,
                        "seconds": round(self.seconds, 3)},
        }

    def to_text(self) -> str:
        lines = [f"{f.severity} {f.rule} {f.key if f.key is not None else '-'}: {f.message}" for f in self.findings]
        lines.append(f"{self.url}: flavor {self.flavor}; {self.count(Severity.ERROR)} errors, "
                     f"{self.count(Severity.WARNING)} warnings, {self.count(Severity.INFO)} infos; "
                     f"{self.objects_read} objects read")
        return "\n".join(lines) + "\n"

    def render(self, fmt: str) -> str:
        if fmt == "json":
            return json.dumps(self.to_json(), ensure_ascii=False, indent=1) + "\n"
        return self.to_text()
