"""The reference pages build as a site, strictly, and the pages outside it link only to what exists.

mkdocs.yml turns every kind of doubt into a warning (a page left out of the nav, a link to a missing page or
anchor) and ``--strict`` turns each warning into a failed build, so a broken link fails the suite. The two
negative tests prove the configuration does catch both, on a copy. README.md, CONTRIBUTING.md and CHANGELOG.md
live outside the site (GitHub shows them): their relative links are checked here. The interop picture is held to
the committed report like the reports themselves.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, require_module

ROOT_PAGES = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")
#: a Markdown link or image whose target is neither a URL nor an anchor on the same page
RELATIVE_LINK = re.compile(r"!?\[[^\]]*\]\((?![a-z]+://|#|mailto:)([^)\s]+)\)")


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    require_module("mkdocs")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, timeout=300)


def _copy(tmp_path: Path) -> Path:
    """mkdocs.yml and docs/ copied into ``tmp_path``; the copy's config path."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    return tmp_path / "mkdocs.yml"


def test_the_site_builds_strictly(tmp_path):
    built = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    pages = {p.relative_to(REPO / "docs").with_suffix("").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert {"index", "commands", "guarantees", "reader", "writer", "api", "rules", "claims"} <= pages
    assert all((tmp_path / "site" / page / "index.html").is_file() or page == "index" for page in pages)
    # the API reference is generated: every public name, with its signature's parameters
    import nczarr_conformance

    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    public = [name for name in nczarr_conformance.__all__ if not name.startswith("_")]
    assert [name for name in public if f'id="nczarr_conformance.{name}"' not in reference] == []
    assert all(param in reference for param in ("max_bytes", "storage_options", "for_readers"))


def test_a_page_left_out_of_the_nav_fails_the_build(tmp_path):
    config = _copy(tmp_path)
    (tmp_path / "docs" / "orphan.md").write_text("# Orphan\n\nIn no nav.\n", encoding="utf-8")
    built = _build(config, tmp_path / "site")
    assert built.returncode != 0 and "orphan.md" in built.stderr, built.stderr


@pytest.mark.parametrize("link", ["[gone](no-such-page.md)", "[gone](commands.md#no-such-anchor)"])
def test_a_broken_link_fails_the_build(tmp_path, link):
    config = _copy(tmp_path)
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + f"\n{link}\n", encoding="utf-8")
    built = _build(config, tmp_path / "site")
    assert built.returncode != 0 and link[link.index("(") + 1:-1].split("#")[0] in built.stderr, built.stderr


def _anchors(page: Path) -> set[str]:
    """The heading anchors GitHub and mkdocs give a Markdown page (lower case, punctuation dropped, spaces → -)."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", ROOT_PAGES)
def test_root_pages_link_only_to_what_exists(page):
    text = (REPO / page).read_text(encoding="utf-8")
    targets = RELATIVE_LINK.findall(text)
    assert targets or page == "CHANGELOG.md"
    broken = []
    for target in targets:
        path, _, anchor = target.partition("#")
        resolved = (REPO / page).parent / path
        if not resolved.exists() or (anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved)):
            broken.append(target)
    assert broken == []


def test_the_interop_picture_is_the_committed_report():
    """docs/img/interop-overview.svg sums reports/interop.json: a report regenerated without the picture fails."""
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "interop-overview"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
