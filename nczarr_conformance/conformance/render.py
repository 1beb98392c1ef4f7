"""interop.{json,md,html} and rules.{json,md,html} (docs/contracts/interop-report.md); rendering only.

interop.html opens with an overview grid (writer × reader: how many cases pass, deviate, fail, are a known
peer fault or were skipped, each linking to that pair's details); every difference is worded by its side
(``writer was given … / reader read …``, :func:`sided`): the stored ``differences`` keep the model diff's
``first != second`` form, the intended model (what the writer was given) being first.
"""
from __future__ import annotations

import html
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.gate import known_faults
from nczarr_conformance.conformance.matrix import NOT_APPLICABLE, MatrixRun
from nczarr_conformance.conformance.rules import SPEC_RULES, Result

COLORS = {"pass": "#2e7d32", "deviates": "#ef6c00", "fails": "#c62828", "skipped": "#9e9e9e",
          "follows": "#2e7d32", "not-applicable": "#bdbdbd", "known": "#6a1b9a"}
SYMBOLS = {"pass": "✓", "deviates": "≠", "fails": "✗", "skipped": "–", "follows": "✓", "not-applicable": "n/a",
           "known": "†"}
KNOWN_NOTE = ("† known peer fault: ours does worse here because of the peer, as conformance/gate.py lists with "
              "its evidence (re-checked on every run)")


def _split_values(rest: str) -> tuple[str, str] | None:
    """``first != second`` of a diff line: the split where the first part is a whole JSON value (a value's
    own text may hold " != "), else the first split."""
    parts = rest.split(" != ")
    if len(parts) < 2:
        return None
    for i in range(1, len(parts)):
        left = " != ".join(parts[:i])
        try:
            json.loads(left)
        except ValueError:
            continue
        return left, " != ".join(parts[i:])
    return parts[0], " != ".join(parts[1:])


def sided(line: str) -> str:
    """A difference worded by its side: ``PATH: writer was given A / reader read B``. The first value is the
    case's intended model, which the writer was given (not what it wrote: from one cell, a writer that truncates
    a value cannot be told from a reader that misreads it), the second what the reader returned; ``only in
    first`` and ``only in second`` say which side has it. Other lines (``… and
    N more differences``) are kept as they are."""
    path, sep, rest = line.partition(": ")
    if not sep:
        return line
    if rest == "only in first":
        return f"{path}: writer was given it / reader read nothing there"
    if rest == "only in second":
        return f"{path}: writer was not given it / reader read it"
    values = _split_values(rest)
    return f"{path}: writer was given {values[0]} / reader read {values[1]}" if values else line


def interop_json(run: MatrixRun, generated: str, known: dict[tuple[str, str, str], str] | None = None,
                 ) -> dict[str, Any]:
    """The report's document; ``known`` (gate.known_faults) lists the cells that are a known peer fault."""
    known = known_faults(run) if known is None else known
    return {"report": "nczarr-interop/1", "generated": generated,
            "implementations": [{k: v for k, v in i.items() if k in ("id", "name", "version", "writes", "reads",
                                                                      "available", "reason")}
                                for i in run.implementations],
            "cases": [{"id": c, "title": BY_ID[c].title} for c in dict.fromkeys(cell.case for cell in run.cells)],
            "cells": [c.to_json() for c in run.cells],
            "known_faults": [{"case": c, "writer": w, "reader": r, "why": why}
                             for (c, w, r), why in sorted(known.items())]}


def rules_json(results: list[Result], generated: str) -> dict[str, Any]:
    graded = {r.rule for r in results}
    return {"report": "nczarr-rules/1", "generated": generated,
            "rules": [{"id": r.id, "source": r.source, "statement": r.statement} for r in SPEC_RULES
                      if r.id in graded],  # a run of some rules (--rules) lists those
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
             (f"Generated {doc['generated']} by `nczarr-conformance report`. Every cell is a real run: the writer "
              "wrote the case's intended model, the reader read it back, and the canonical models were compared "
              "(a pure-Zarr writer or reader is compared on arrays and untyped attributes only)."), "",
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
             (f"Generated {doc['generated']} by `nczarr-conformance report`: each result comes from what the "
              "implementation wrote in the matrix run, or read from a store built for the rule. "
              "Legend: ✓ follows, ≠ deviates (a deliberate one of ours says \"documented deviation\" in its "
              "evidence), n/a not applicable, – skipped."), "",
             "| rule | " + " | ".join(impls) + " |", "|---|" + "---|" * len(impls)]
    for rule in doc["rules"]:
        symbols = " | ".join(SYMBOLS[by_key[(rule['id'], i)]['status']] for i in impls)
        lines.append(f"| {rule['id']} | {symbols} |")
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
#: interop.html's own: the overview grid and the known-peer-fault mark
INTEROP_STYLE = """
table.o td{font-size:85%;white-space:nowrap;padding:4px 6px}td.k{outline:3px dashed #6a1b9a;outline-offset:-3px}"""


def _cell_html(status: str, anchor: str | None, title: str, known: str | None = None) -> str:
    """One coloured cell; ``known``: why it is a known peer fault (marked †, outlined)."""
    symbol = html.escape(SYMBOLS[status] + (SYMBOLS["known"] if known else ""))
    inner = f'<a href="#{anchor}">{symbol}</a>' if anchor else symbol
    if known:
        title = f"known peer fault: {known}"
    mark = ' class="c k"' if known else ' class="c"'
    return f'<td{mark} style="background:{COLORS[status]}" title="{html.escape(title)}">{inner}</td>'


def _page(title: str, body: list[str], style: str = "") -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html.escape(title) +
            f"</title><style>{STYLE}{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def _legend(statuses: tuple[str, ...]) -> str:
    def label(s: str) -> str:
        return "known peer fault" if s == "known" else s
    return '<p class="legend">' + "".join(f'<span style="background:{COLORS[s]}">{SYMBOLS[s]} {label(s)}</span>'
                                         for s in statuses) + "</p>"


def _known(doc: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    return {(k["case"], k["writer"], k["reader"]): k["why"] for k in doc.get("known_faults", [])}


def _pair_anchor(writer: str, reader: str) -> str:
    return "p-" + "-".join(p.replace(".", "_") for p in (writer, reader))


def _kind(cell: dict[str, Any], known: dict[tuple[str, str, str], str]) -> str:
    """pass, deviates, fails, skipped, or known (a deviation or failure that is a known peer fault)."""
    key = (cell["case"], cell["writer"], cell["reader"])
    return "known" if key in known and cell["status"] in ("deviates", "fails") else str(cell["status"])


def _overview(doc: dict[str, Any], writers: list[str], readers: list[str],
              known: dict[tuple[str, str, str], str]) -> tuple[str, list[str]]:
    """The writer × reader grid (counts per kind, each cell linking to its pair's section) and the
    pair sections it links to."""
    by_pair: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cell in doc["cells"]:
        by_pair.setdefault((cell["writer"], cell["reader"]), []).append(cell)
    order = ("pass", "deviates", "fails", "known", "skipped")
    rows = ['<table class="o"><tr><th>writer \\ reader</th>' + "".join(f"<th>{html.escape(r)}</th>" for r in readers)
            + "</tr>"]
    sections: list[str] = []
    for w in writers:
        tds = []
        for r in readers:
            cells = [c for c in by_pair.get((w, r), []) if c["message"] != NOT_APPLICABLE]
            counts = Counter(_kind(c, known) for c in cells)
            if not cells:
                tds.append("<td></td>")
                continue
            worst = next((k for k in ("fails", "deviates", "known", "pass") if counts[k]), "skipped")
            text = " ".join(f"{SYMBOLS[k]}{counts[k]}" for k in order if counts[k])
            title = ", ".join(f"{counts[k]} {k if k != 'known' else 'known peer fault'}" for k in order if counts[k])
            anchor = _pair_anchor(w, r)
            tds.append(f'<td class="c" style="background:{COLORS[worst]}" title="{html.escape(title)}">'
                       f'<a href="#{anchor}">{html.escape(text)}</a></td>')
            items = []
            for c in cells:
                kind = _kind(c, known)
                if kind == "pass":
                    continue
                label = "known peer fault: " + known[(c["case"], w, r)] if kind == "known" else kind
                target = _anchor(c["case"], w, r)
                items.append(f'<li><a href="#{target}">{html.escape(c["case"])}</a> {html.escape(label)}</li>')
            body = "".join(items) or "<li>every case passes</li>"
            sections.append(f'<h3 id="{anchor}">{html.escape(w)} → {html.escape(r)}: '
                            f'{html.escape(title)}</h3><ul>{body}</ul>')
        rows.append(f'<tr><th class="w">{html.escape(w)}</th>{"".join(tds)}</tr>')
    return "".join(rows) + "</table>", sections


def interop_html(doc: dict[str, Any]) -> str:
    impls = doc["implementations"]
    readers = [i["id"] for i in impls if i["reads"]]
    writers = [i["id"] for i in impls if i["writes"]]
    by_key = {(c["case"], c["writer"], c["reader"]): c for c in doc["cells"]}
    known = _known(doc)
    totals = Counter(_kind(c, known) for c in doc["cells"])
    grid, pairs = _overview(doc, writers, readers, known)
    body = ["<h1>NCZarr interoperability matrix</h1>",
            (f"<p>Overview: each writer × reader over every case — {totals['pass']} pass, {totals['deviates']} "
             f"deviate, {totals['fails']} fail, {totals['known']} known peer faults, {totals['skipped']} skipped. "
             "Click a cell for that pair's cases.</p>"),
            _legend(("pass", "deviates", "fails", "known", "skipped")), grid,
            (f"<p>Generated {html.escape(doc['generated'])}. Rows are writers, columns readers; every cell is a real "
             "run of that peer. Click a coloured cell for the exact canonical-model difference, each line worded "
             f"by its side (the writer was given the case's intended model). {html.escape(KNOWN_NOTE)}.</p>"),
            "<table><tr><th>implementation</th><th>version</th></tr>" +
            "".join(f"<tr><th class=\"w\">{html.escape(i['id'])}</th>"
                    f"<td>{html.escape(i['version'] or 'missing: ' + i.get('reason', ''))}</td></tr>"
                    for i in impls) + "</table>"]
    details: list[str] = []
    for case in doc["cases"]:
        body.append(f"<h2 id=\"{_anchor(case['id'])}\">{html.escape(case['id'])}</h2>"
                    f"<p>{html.escape(case['title'])}</p>")
        rows = ["<table><tr><th>writer \\ reader</th>" + "".join(f"<th>{html.escape(r)}</th>" for r in readers)
                + "</tr>"]
        for w in _writers_of(doc, case["id"], writers):
            tds = []
            for r in readers:
                cell = by_key.get((case["id"], w, r))
                if cell is None:
                    tds.append("<td></td>")
                    continue
                anchor = None
                why = known.get((case["id"], w, r)) if _kind(cell, known) == "known" else None
                if cell["status"] in ("deviates", "fails", "skipped"):
                    anchor = _anchor(case["id"], w, r)
                    items = "".join(f"<li>{html.escape(sided(d))}</li>" for d in cell["differences"])
                    if cell["message"]:
                        items += f"<li>{html.escape(cell['message'])}</li>"
                    if cell.get("detail"):
                        items += f"<li><pre>{html.escape(cell['detail'])}</pre></li>"
                    status = cell["status"] + (f"; † known peer fault: {why}" if why else "")
                    details.append(f'<h3 id="{anchor}">{html.escape(case["id"])}: {html.escape(w)} → '
                                   f'{html.escape(r)} ({html.escape(status)})</h3><ul>{items}</ul>')
                tds.append(_cell_html(cell["status"], anchor, cell["message"] or cell["status"], why))
            rows.append(f"<tr><th class=\"w\">{html.escape(w)}</th>{''.join(tds)}</tr>")
        body.append("".join(rows) + "</table>")
    body += ["<h2>Writer → reader pairs</h2>", *pairs, "<h2>Details</h2>", *details]
    return _page("NCZarr interoperability matrix", body, INTEROP_STYLE)


def rules_html(doc: dict[str, Any]) -> str:
    impls = list(dict.fromkeys(r["implementation"] for r in doc["results"]))
    by_key = {(r["rule"], r["implementation"]): r for r in doc["results"]}
    rows = ["<table><tr><th>rule</th>" + "".join(f"<th>{html.escape(i)}</th>" for i in impls) + "</tr>"]
    for rule in doc["rules"]:
        tds = "".join(_cell_html(by_key[(rule["id"], i)]["status"], _anchor(rule["id"], i),
                                 by_key[(rule["id"], i)]["evidence"])
                      for i in impls)
        rows.append(f'<tr><th class="w" title="{html.escape(rule["statement"])}">'
                    f'{html.escape(rule["id"])}</th>{tds}</tr>')
    details = []
    for rule in doc["rules"]:
        details.append(f"<h3>{html.escape(rule['id'])}: {html.escape(rule['statement'])}</h3>"
                       f"<p>{html.escape(rule['source'])}</p><ul>")
        for i in impls:
            r = by_key[(rule["id"], i)]
            details.append(f'<li id="{_anchor(rule["id"], i)}"><b>{html.escape(i)}</b> '
                           f'{r["status"]}: {html.escape(r["evidence"])}</li>')
        details.append("</ul>")
    body = ["<h1>NCZarr spec rules × implementations</h1>", f"<p>Generated {html.escape(doc['generated'])}.</p>",
            _legend(("follows", "deviates", "not-applicable", "skipped")), "".join(rows) + "</table>",
            "<h2>Evidence</h2>", *details]
    return _page("NCZarr spec rules", body)


def write_reports(run: MatrixRun, results: list[Result], out: Path, generated: str | None = None,
                  known: dict[tuple[str, str, str], str] | None = None) -> list[Path]:
    generated = generated or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out.mkdir(parents=True, exist_ok=True)
    interop = interop_json(run, generated, known)
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
