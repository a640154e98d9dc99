"""The translated editions stay in step with the English course (docs/translations.md): every catalog
complete, none fuzzy, nothing stale; each edition built from the catalogs as committed; an edition's code
cells byte-for-byte the English ones. Each check is shown to fail on the fault it is there for.

A teacher test (the student edition has no catalogs): it needs the docs extra (Sphinx for the messages,
MyST's parser for the editions), which the course's `make test` installs."""

import copy
import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import site_pages  # noqa: E402
import student_edition  # noqa: E402
import translations as T  # noqa: E402

LESSON = "notebooks/05a_delta_rule"


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """The English pages' messages, extracted now by Sphinx's gettext builder."""
    return T.templates(tmp_path_factory.mktemp("i18n"))


@pytest.fixture
def locales(tmp_path):
    """A copy of locales/ to spoil."""
    shutil.copytree(T.LOCALES, tmp_path / "locales")
    return tmp_path / "locales"


def spoil(locales, lang, change, page=LESSON):
    path = T.catalog_path(lang, page, locales)
    catalog = T.read_catalog(path)
    message = next(m for m in catalog if m.id and T.has_words(m.id) and "$" in m.id and m.string != m.id)
    change(catalog, message)
    T.write_catalog(path, catalog)
    return message.id


def test_every_catalog_is_complete_and_in_step_with_the_english(templates):
    found = [line for lang in T.LANGUAGES for line in T.problems_of(lang, templates)]
    assert not found, (f"{len(found)} problems: run `make catalogs`, translate what it lists (tools/"
                       "translations.py todo FILE.po), then `make edition LANG=...`:\n"
                       + "\n".join(found[:40]))


def _fuzzy(catalog, m):
    m.flags.add("fuzzy")


def _untranslated(catalog, m):
    m.string = ""


def _dropped(catalog, m):
    catalog.delete(m.id)


def _equation_lost(catalog, m):
    m.string = T.MATH.sub("", m.string, count=1)


@pytest.mark.parametrize("lang", T.LANGUAGES)
@pytest.mark.parametrize("change, says", [(_fuzzy, "fuzzy"), (_untranslated, "untranslated"),
                                          (_dropped, "missing"), (_equation_lost, "drops equation")])
def test_a_fuzzy_untranslated_missing_or_unfaithful_message_fails(templates, locales, lang, change, says):
    msgid = spoil(locales, lang, change)
    found = T.problems_of(lang, templates, locales, only=[LESSON])
    assert any(says in line and (repr(msgid[:70]) in line or says == "missing") for line in found), found[:5]


@pytest.mark.parametrize("lang", T.LANGUAGES)
def test_a_changed_english_sentence_shows_its_old_translation_nowhere(templates, locales, lang, tmp_path):
    """The English of one paragraph changes: its catalog entry is stale and the new message missing, and
    the edition refuses to build rather than show the old translation (the site shows the English)."""
    changed = copy.deepcopy(templates)
    template = changed[LESSON]
    old = next(m for m in template if m.id and T.has_words(m.id) and "$" in m.id)
    template.delete(old.id)
    template.add(old.id + " (changed)")
    found = T.problems_of(lang, changed, locales, only=[LESSON])
    mine = [line.rsplit(": ", 1)[-1] for line in found if repr(old.id[:70]) in line]
    assert sorted(mine) == ["missing (make catalogs)",
                            "stale, the English page has no such message (make catalogs)"]

    english = ROOT / f"{LESSON}.ipynb"
    nb = json.loads(english.read_text())
    for cell in (c for c in nb["cells"] if c["cell_type"] == "markdown"):
        text = "".join(cell["source"])
        block = next((b for b in T.text_blocks(text) if T.message_of(b[3]) == old.id), None)
        if block:
            lines = text.split("\n")
            lines[block[1] - 1] += " (changed)"
            cell["source"] = "\n".join(lines)
            break
    else:
        pytest.fail(f"no paragraph of {english.name} has the message {old.id[:60]!r}")
    path = tmp_path / english.name
    path.write_text(json.dumps(nb))
    repo, branch = site_pages.repository(ROOT)
    with tempfile.TemporaryDirectory() as scratch:
        links = site_pages.Links(ROOT, scratch, repo, branch)
        with pytest.raises(T.MissingTranslation, match="no translation of"):
            T.edition_notebook(path, lang, links, f"editions/{lang}/{english.name}", locales)


@pytest.mark.parametrize("lang", T.LANGUAGES)
def test_the_committed_edition_is_the_one_its_catalogs_build(lang, tmp_path):
    written = T.write_edition(lang, out=tmp_path)
    edition = T.EDITIONS / lang
    committed = sorted(p.relative_to(edition) for p in edition.rglob("*") if p.is_file())
    assert sorted(p.relative_to(tmp_path) for p in written) == committed
    stale = [str(p) for p in committed if (tmp_path / p).read_bytes() != (edition / p).read_bytes()]
    assert not stale, f"editions/{lang}/ is not what its catalogs build (make edition LANG={lang}): {stale}"


@pytest.mark.parametrize("lang", T.LANGUAGES)
def test_an_editions_code_cells_are_the_english_ones_byte_for_byte(lang):
    for english in site_pages.lessons(ROOT):
        en = json.loads(english.read_text())
        ed = json.loads((T.EDITIONS / lang / "notebooks" / english.name).read_text())
        assert T.edition_differences(en, ed) == [], english.name
        pairs = [(a, b) for a, b in zip(en["cells"], ed["cells"], strict=True)
                 if a["cell_type"] == "markdown"]
        translated = sum(a["source"] != b["source"] for a, b in pairs)
        assert translated >= 0.9 * len(pairs), f"{english.name}: {translated} of {len(pairs)} translated"
    spoiled = copy.deepcopy(ed)
    code = next(c for c in spoiled["cells"] if c["cell_type"] == "code")
    code["source"] = ["# x\n", *code["source"]]
    where = spoiled["cells"].index(code) + 1
    assert T.edition_differences(en, spoiled) == [f"cell {where}: the code cell is not the English one"]
    spoiled = copy.deepcopy(ed)
    text = next(c for c in spoiled["cells"] if c["cell_type"] == "markdown" and "$" in "".join(c["source"]))
    text["source"] = [T.MATH.sub("$x$", "".join(text["source"]), count=1)]
    assert any("equations differ" in p for p in T.edition_differences(en, spoiled))


def test_translated_markdown_keeps_its_layout():
    text = ("## A heading\n\nA paragraph\nover two lines with $x_t$ and `code`.\n\n- an item\n  that wraps\n"
            "- [a link](notebooks/02_linear_attention.ipynb)\n\n> a quote\n\n| a | b |\n|---|---|\n"
            "| one cell | `x` |\n\n$$\nS_t = S_{t-1}\n$$\n\n```python\nprint('a paragraph')\n```\n")
    out = T.translate_markdown(text, lambda content: "«" + " ".join(content.split()) + "»")
    assert out == ("## «A heading»\n\n«A paragraph over two lines with $x_t$ and `code`.»\n\n"
                   "- «an item that wraps»\n- «[a link](notebooks/02_linear_attention.ipynb)»\n\n"
                   "> «a quote»\n\n"
                   "| «a» | «b» |\n|---|---|\n| «one cell» | «`x`» |\n\n$$\nS_t = S_{t-1}\n$$\n\n"
                   "```python\nprint('a paragraph')\n```\n")


def test_a_translation_breaking_its_markup_or_its_conventions_is_named():
    assert T.kept_verbatim("**Bold.** Then text.", "**粗体**。然后是文本。") == []
    assert "markup" in T.kept_verbatim("**Bold.** Then text.", "**粗体。**然后是文本。")[0]   # no bold
    assert "code" in T.kept_verbatim("Call `f`.", "调用 f。")[0]
    assert "list item" in T.kept_verbatim("1. The recurrence", "1. 递推形式")[0]   # a heading, by itself
    assert T.kept_verbatim("1. The recurrence", "1\\. 递推形式") == []
    assert T.conventions("zh_CN", "状态 $S$ 很大（对 `K` 而言），对吗？") == []
    found = T.conventions("zh_CN", "状态S很大(对吧),真的")
    assert len(found) == 3, found        # no space before S, ASCII parentheses, an ASCII comma
    assert T.conventions("de", "0.25 von 1024 und 16\u202f384 Tokens, `1,024` im Code") == []
    assert T.conventions("de", "ab 1,024 Tokens")


@pytest.mark.parametrize("lang", T.LANGUAGES)
def test_a_student_edition_in_a_language_has_its_prose_and_the_english_checks(lang, tmp_path):
    notebooks = student_edition.build(tmp_path / "student", lang=lang)
    for path in notebooks:
        student = json.loads(path.read_text())
        student["cells"] = [c for c in student["cells"] if "kimik3" not in c["metadata"]]  # the question
        edition = json.loads((T.EDITIONS / lang / "notebooks" / path.name).read_text())
        english = json.loads((ROOT / "notebooks" / path.name).read_text())
        for s, ed, en in zip(student["cells"], edition["cells"], english["cells"], strict=True):
            if s["cell_type"] == "markdown":
                assert s["source"] == [line.replace(f"editions/{lang}/notebooks/", "notebooks/")
                                       for line in ed["source"]], path.name
            else:
                assert s["source"] == en["source"] and s["outputs"] == [], path.name
    readme = " ".join((tmp_path / "student" / "README.md").read_text().split())
    english = [m for m in T.student_messages() if len(m.split()) > 3 and T.PLACEHOLDER.sub("", m) in readme]
    assert not english, f"the {lang} student edition's README has English left: {english[:3]}"
    assert "03, 05b, 06, 07a" in readme and "{" not in readme   # its placeholders filled
