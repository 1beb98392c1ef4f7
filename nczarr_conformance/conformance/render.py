"""interop.{json,md,html} and rules.{json,md,html} (docs/contracts/interop-report.md); rendering only."""
from __future__ import annotations

import html
import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.matrix import NOT_APPLICABLE, MatrixRun
from nczarr_conformance.conformance.rules import SPEC_RULES, Result

COLORS = {"pass": "#2e7d32", "deviates": "#ef6c00", "fails": "#c62828", "skipped": "#9e9e9e",
          "follows": "#2e7d32", "not-applicable": "#bdbdbd"}
SYMBOLS = {"pass": "✓", "deviates": "≠", "fails": "✗", "skipped": "–", "follows": "✓", "not-applicable": "n/a"}


def interop_json(run: MatrixRun, generated: str) -> dict[str, Any]:
    return {"report": "nczarr-interop/1", "generated": generated,
            "implementations": [{k: v for k, v in i.items() if k in ("id", "name", "version", "writes", "reads",
                                                                      "available", "reason")}
                                for i in run.implementations],
            "cases": [{"id": c, "title": BY_ID[c].title} for c in dict.fromkeys(cell.case for cell in run.cells)],
            "cells": [c.to_json() for c in run.cells]}


def rules_json(results: list[Result], generated: str) -> dict[str, Any]:
    return {"report": "nczarr-rules/1", "generated": generated,
            "rules": [{"id": r.id, "source": r.source, "statement": r.statement} for r in SPEC_RULES],
            "results": [r.to_json() for r in results]}


def _anchor(*parts: str) -> str:
    return "d-" + "-".join(p.replace(".", "_") for p in parts)


def _writers_of(doc: dict[str, Any], case: str, writers: list[str]) -> list[str]:
    """Writers with a row for this case: not those that never apply to it (corpus vs model cases)."""
    empty = {c["writer"] for c in doc["cells"] if c["case"] == case and c["message"] == NOT_APPLICABLE}
    return [w for w in writers if w not in empty]


def interop_md(doc: dict[str, Any]) -> str:
    impls = doc["implementations"]
    readers = [i["id"] for i in impls if i["reads"]]
    writers = [i["id"] for i in impls if i["writes"]]
    totals = Counter(c["status"] for c in doc["cells"])
    lines = ["# NCZarr interoperability matrix", "",
             f"Generated {doc['generated']} by `nczarr-conformance report`. Every cell is a real run: the writer "
             "wrote the case's intended model, the reader read it back, and the canonical models were compared "
             "(a pure-Zarr writer or reader is compared on arrays and untyped attributes only).", "",
             "| implementation | version | writes | reads |", "|---|---|---|---|"]
    for i in impls:
        version = i["version"] or f"missing: {i.get('reason', '')}"
        lines.append(f"| {i['id']} ({i['name']}) | {version} | {'yes' if i['writes'] else ''} | "
                     f"{'yes' if i['reads'] else ''} |")
    lines += ["", "Totals: " + ", ".join(f"{totals[s]} {s}" for s in ("pass", "deviates", "fails", "skipped")), "",
              "Legend: ✓ pass, ≠ deviates, ✗ fails, – skipped. Rows are writers, columns readers.", ""]
    by_key = {(c["case"], c["writer"], c["reader"]): c for c in doc["cells"]}
    for case in doc["cases"]:
        lines += [f"## {case['id']}", "", case["title"], "", "| writer \\ reader | " + " | ".join(readers) + " |",
                  "|---|" + "---|" * len(readers)]
        details = []
        for w in _writers_of(doc, case["id"], writers):
            row = []
            for r in readers:
                cell = by_key.get((case["id"], w, r))
                if cell is None:
                    row.append("")
                    continue
                row.append(SYMBOLS[cell["status"]])
                if cell["status"] in ("deviates", "fails"):
                    what = "; ".join(cell["differences"][:4]) or cell["message"]
                    details.append(f"- {w} → {r} ({cell['status']}): {what}")
            lines.append(f"| {w} | " + " | ".join(row) + " |")
        if details:
            lines += ["", *details]
        lines.append("")
    return "\n".join(lines)


def rules_md(doc: dict[str, Any]) -> str:
    impls = list(dict.fromkeys(r["implementation"] for r in doc["results"]))
    by_key = {(r["rule"], r["implementation"]): r for r in doc["results"]}
    lines = ["# NCZarr spec rules × implementations", "",
             f"Generated {doc['generated']} by `nczarr-conformance report`: each result comes from what the "
             "implementation wrote in the matrix run, or read from a store built for the rule. "
             "Legend: ✓ follows, ≠ deviates (a deliberate one of ours says \"documented deviation\" in its "
             "evidence), n/a not applicable, – skipped.", "",
             "| rule | " + " | ".join(impls) + " |", "|---|" + "---|" * len(impls)]
    for rule in doc["rules"]:
        lines.append(f"| {rule['id']} | " + " | ".join(SYMBOLS[by_key[(rule['id'], i)]['status']] for i in impls) + " |")
    lines += ["", "## Rules and evidence", ""]
    for rule in doc["rules"]:
        lines += [f"### {rule['id']}: {rule['statement']}", "", f"Source: {rule['source']}.", ""]
        for i in impls:
            r = by_key[(rule["id"], i)]
            lines.append(f"- **{i}** {r['status']}: {r['evidence']}")
        lines.append("")
    return "\n".join(lines)


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:center}
th.w{text-align:left}td.c a{color:#fff;text-decoration:none;display:block}td.c{color:#fff;font-weight:bold}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px;color:#fff}
li{margin:.2em 0;font-family:monospace;font-size:90%}h2{margin-top:2em}"""


def _cell_html(status: str, anchor: str | None, title: str) -> str:
    symbol = html.escape(SYMBOLS[status])
    inner = f'<a href="#{anchor}">{symbol}</a>' if anchor else symbol
    return f'<td class="c" style="background:{COLORS[status]}" title="{html.escape(title)}">{inner}</td>'


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html.escape(title) +
            f"</title><style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def _legend(statuses: tuple[str, ...]) -> str:
    return '<p class="legend">' + "".join(f'<span style="background:{COLORS[s]}">{SYMBOLS[s]} {s}</span>'
                                         for s in statuses) + "</p>"


def interop_html(doc: dict[str, Any]) -> str:
    impls = doc["implementations"]
    readers = [i["id"] for i in impls if i["reads"]]
    writers = [i["id"] for i in impls if i["writes"]]
    by_key = {(c["case"], c["writer"], c["reader"]): c for c in doc["cells"]}
    body = ["<h1>NCZarr interoperability matrix</h1>",
            f"<p>Generated {html.escape(doc['generated'])}. Rows are writers, columns readers; every cell is a real "
            "run of that peer. Click a coloured cell for the exact canonical-model difference.</p>",
            _legend(("pass", "deviates", "fails", "skipped")),
            "<table><tr><th>implementation</th><th>version</th></tr>" +
            "".join(f"<tr><th class=\"w\">{html.escape(i['id'])}</th><td>{html.escape(i['version'] or 'missing: ' + i.get('reason', ''))}</td></tr>"
                    for i in impls) + "</table>"]
    details: list[str] = []
    for case in doc["cases"]:
        body.append(f"<h2 id=\"{_anchor(case['id'])}\">{html.escape(case['id'])}</h2><p>{html.escape(case['title'])}</p>")
        rows = ["<table><tr><th>writer \\ reader</th>" + "".join(f"<th>{html.escape(r)}</th>" for r in readers) + "</tr>"]
        for w in _writers_of(doc, case["id"], writers):
            tds = []
            for r in readers:
                cell = by_key.get((case["id"], w, r))
                if cell is None:
                    tds.append("<td></td>")
                    continue
                anchor = None
                if cell["status"] in ("deviates", "fails", "skipped"):
                    anchor = _anchor(case["id"], w, r)
                    items = "".join(f"<li>{html.escape(d)}</li>" for d in cell["differences"])
                    if cell["message"]:
                        items += f"<li>{html.escape(cell['message'])}</li>"
                    details.append(f'<h3 id="{anchor}">{html.escape(case["id"])}: {html.escape(w)} → '
                                   f'{html.escape(r)} ({cell["status"]})</h3><ul>{items}</ul>')
                tds.append(_cell_html(cell["status"], anchor, cell["message"] or cell["status"]))
            rows.append(f"<tr><th class=\"w\">{html.escape(w)}</th>{''.join(tds)}</tr>")
        body.append("".join(rows) + "</table>")
    body += ["<h2>Details</h2>", *details]
    return _page("NCZarr interoperability matrix", body)


def rules_html(doc: dict[str, Any]) -> str:
    impls = list(dict.fromkeys(r["implementation"] for r in doc["results"]))
    by_key = {(r["rule"], r["implementation"]): r for r in doc["results"]}
    rows = ["<table><tr><th>rule</th>" + "".join(f"<th>{html.escape(i)}</th>" for i in impls) + "</tr>"]
    for rule in doc["rules"]:
        tds = "".join(_cell_html(by_key[(rule["id"], i)]["status"], _anchor(rule["id"], i), by_key[(rule["id"], i)]["evidence"])
                      for i in impls)
        rows.append(f'<tr><th class="w" title="{html.escape(rule["statement"])}">{html.escape(rule["id"])}</th>{tds}</tr>')
    details = []
    for rule in doc["rules"]:
        details.append(f"<h3>{html.escape(rule['id'])}: {html.escape(rule['statement'])}</h3><p>{html.escape(rule['source'])}</p><ul>")
        for i in impls:
            r = by_key[(rule["id"], i)]
            details.append(f'<li id="{_anchor(rule["id"], i)}"><b>{html.escape(i)}</b> {r["status"]}: {html.escape(r["evidence"])}</li>')
        details.append("</ul>")
    body = ["<h1>NCZarr spec rules × implementations</h1>", f"<p>Generated {html.escape(doc['generated'])}.</p>",
            _legend(("follows", "deviates", "not-applicable", "skipped")), "".join(rows) + "</table>",
            "<h2>Evidence</h2>", *details]
    return _page("NCZarr spec rules", body)


def write_reports(run: MatrixRun, results: list[Result], out: Path, generated: str | None = None) -> list[Path]:
    generated = generated or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out.mkdir(parents=True, exist_ok=True)
    interop = interop_json(run, generated)
    rules = rules_json(results, generated)
    files = {
        "interop.json": json.dumps(interop, ensure_ascii=False, indent=1) + "\n",
        "interop.md": interop_md(interop) + "\n",
        "interop.html": interop_html(interop),
        "rules.json": json.dumps(rules, ensure_ascii=False, indent=1) + "\n",
        "rules.md": rules_md(rules) + "\n",
        "rules.html": rules_html(rules),
    }
    written = []
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    return written
