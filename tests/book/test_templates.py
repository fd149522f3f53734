"""The book's page templates (edit_lib/book/templates, rendered by ``pages.render``)."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from jinja2 import UndefinedError

from edit_lib.book import pages

ROOT = Path(__file__).parents[2]
TEMPLATES = ROOT / "edit_lib" / "book" / "templates"


def test_every_template_is_rendered_by_a_page_and_every_render_has_its_template():
    named = {m for f in (ROOT / "edit_lib").rglob("*.py") for m in re.findall(r'render\("(\w+)"', f.read_text())}
    files = {p.name.removesuffix(".md.j2") for p in TEMPLATES.glob("*.md.j2")}
    assert files and named == files


def test_a_name_the_caller_does_not_give_is_an_error_not_an_empty_string():
    with pytest.raises(UndefinedError, match="'report' is undefined"):
        pages.render("conclusions", a="x", b="y", source="s", same=True)
    text = pages.render("conclusions", a="x", b="y", source="s.json", same=False, report="R")
    assert text.startswith("# Same conclusions? x and y\n") and "**not** the same conclusions" in text


def test_the_templates_ship_with_the_package():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["edit_lib"]
    assert "book/templates/*.md.j2" in data
