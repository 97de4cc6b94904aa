"""The manual's lists are complete, by test: every field of StreamingSettings has a row in
docs/settings.md's table, every public name (``sse_middleware.__all__``) an entry in docs/reference.md,
and every test module a line in tests/README.md's map. Each helper is shown a page that lacks one (the
control)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import sse_middleware
from sse_middleware import StreamingSettings

ROOT = Path(__file__).resolve().parents[2]


def _table_fields(markdown: str) -> set[str]:
    """The names in the first cell of each table row (a row may name several: `` `a`, `b` ``)."""
    cells = re.findall(r"^\|([^|\n]*)\|", markdown, re.MULTILINE)
    return {name for cell in cells for name in re.findall(r"`(\w+)`", cell)}


def _reference_entries(markdown: str) -> set[str]:
    """The names mkdocstrings renders: ``::: sse_middleware.NAME`` lines."""
    return set(re.findall(r"^::: sse_middleware\.(\w+)\s*$", markdown, re.MULTILINE))


def _test_modules() -> set[str]:
    return {
        path.relative_to(ROOT / "tests").as_posix()
        for folder in ("unit", "e2e")
        for path in (ROOT / "tests" / folder).glob("test_*.py")
    }


def _named_modules(markdown: str) -> set[str]:
    """The test files the map's rows name: ``test_x`` in its Unit column is ``unit/test_x.py``, in its
    End to end column ``e2e/test_x.py`` (a name may be in both folders)."""
    named = set()
    for row in re.findall(r"^\|(.*)\|\s*$", markdown, re.MULTILINE):
        cells = row.split("|")
        if len(cells) == 3:
            for folder, cell in (("unit", cells[1]), ("e2e", cells[2])):
                named |= {f"{folder}/{name}.py" for name in re.findall(r"\b(test_\w+)\b(?!\*)", cell)}
    return named


def test_every_setting_has_a_row_in_the_settings_table() -> None:
    rows = _table_fields((ROOT / "docs" / "settings.md").read_text(encoding="utf-8"))
    fields = {field.name for field in dataclasses.fields(StreamingSettings)}
    assert fields - rows == set(), f"settings with no row in docs/settings.md: {sorted(fields - rows)}"


def test_every_public_name_has_an_entry_in_the_reference() -> None:
    entries = _reference_entries((ROOT / "docs" / "reference.md").read_text(encoding="utf-8"))
    public = set(sse_middleware.__all__)
    assert public - entries == set(), (
        f"public names missing from docs/reference.md: {sorted(public - entries)}"
    )
    assert entries <= public, f"entries for names that are not public: {sorted(entries - public)}"


def test_every_test_module_is_in_the_tests_map() -> None:
    named = _named_modules((ROOT / "tests" / "README.md").read_text(encoding="utf-8"))
    modules = _test_modules()
    assert len(modules) > 50, modules  # the folders were read
    assert modules - named == set(), f"test files tests/README.md does not name: {sorted(modules - named)}"
    assert named <= modules, f"tests/README.md names files that do not exist: {sorted(named - modules)}"


def test_the_checks_see_what_a_page_lacks() -> None:
    """The control: each helper finds what a page has and misses what it lacks."""
    table = "| field | default |\n|---|---|\n| `coalesce` | `True` |\n| `slo_ttft`, `slo_tpot` | `0` |\n"
    assert _table_fields(table) == {"coalesce", "slo_ttft", "slo_tpot"}
    assert "heartbeat_interval" not in _table_fields(table + "text naming `heartbeat_interval`\n")
    page = "## Settings\n\n::: sse_middleware.StreamingSettings\n    options:\n\nsee `sse_middleware.guard`\n"
    assert _reference_entries(page) == {"StreamingSettings"}
    rows = "| Module | Unit | End to end |\n| `_asgi/x.py` | test_a, test_b (why) | test_a |\n"
    assert _named_modules(rows) == {"unit/test_a.py", "unit/test_b.py", "e2e/test_a.py"}
    assert "unit/test_c.py" not in _named_modules(rows + "test_c named in a sentence\n")
    assert _named_modules("| `_asgi/` | every test_asgi_* | |") == set()  # a pattern names no file


def test_the_docs_home_names_every_lab_scenario() -> None:
    source = (ROOT / "examples" / "lab_model.py").read_text(encoding="utf-8")
    titles = set(re.findall(r'Scenario\(\s*"\w+",\s*"([^"]+)"', source))
    assert len(titles) >= 7, titles  # the scenarios were read
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert {title for title in titles if f"**{title}**" not in home} == set()


def test_the_site_works_from_files_offline() -> None:
    """No web fonts fetched by every page, and links that name their .html files (a directory link opens
    a folder listing, not the page, from ``file://``)."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^  font: false\b", config, re.MULTILINE)
    assert re.search(r"^use_directory_urls: false\b", config, re.MULTILINE)


def test_the_shell_s_docstring_names_each_of_its_modules() -> None:
    import sse_middleware._asgi as shell

    modules = {path.stem for path in Path(shell.__file__).parent.glob("*.py")} - {"__init__"}
    named = set(re.findall(r":mod:`\.(\w+)`", shell.__doc__ or ""))
    assert len(modules) > 10, modules
    assert modules - named == set(), f"_asgi/__init__.py does not name: {sorted(modules - named)}"
