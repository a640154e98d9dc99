"""The translated editions stay in step with the English course (docs/translations.md): every catalog
complete, none fuzzy, nothing stale; each edition built from the catalogs as committed; an edition's code
cells byte-for-byte the English ones. Each check is shown to fail on the fault it is there for.

A teacher test (the student edition has no catalogs): it needs the docs extra (Sphinx for the messages,
MyST's parser for the editions), which the course's `make test` installs."""

import copy
import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tools import site_pages, student_edition
from tools.translations import LANGUAGES, SERIES_COMMA, catalogs, checks, editions, messages, po

ROOT = Path(__file__).resolve().parent.parent

LESSON = "notebooks/05a_delta_rule"


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """The English pages' messages, extracted now by Sphinx's gettext builder."""
    return catalogs.templates(tmp_path_factory.mktemp("i18n"))


@pytest.fixture
def locales(tmp_path):
    """A copy of locales/ to spoil."""
    shutil.copytree(po.LOCALES, tmp_path / "locales")
    return tmp_path / "locales"


def spoil(locales, lang, change, page=LESSON):
    path = po.catalog_path(lang, page, locales)
    catalog = po.read_catalog(path)
    message = next(m for m in catalog
                   if m.id and messages.has_words(m.id) and "$" in m.id and m.string != m.id)
    change(catalog, message)
    po.write_catalog(path, catalog)
    return message.id


def test_every_catalog_is_complete_and_in_step_with_the_english(templates):
    found = [line for lang in LANGUAGES for line in checks.problems_of(lang, templates)]
    assert not found, (f"{len(found)} problems: run `make catalogs`, translate what it lists (python -m "
                       "tools.translations todo FILE.po), then `make edition LANG=...`:\n"
                       + "\n".join(found[:40]))


def _fuzzy(catalog, m):
    m.flags.add("fuzzy")


def _untranslated(catalog, m):
    m.string = ""


def _dropped(catalog, m):
    catalog.delete(m.id)


def _equation_lost(catalog, m):
    m.string = messages.MATH.sub("", m.string, count=1)


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("change, says", [(_fuzzy, "fuzzy"), (_untranslated, "untranslated"),
                                          (_dropped, "missing"), (_equation_lost, "drops equation")])
def test_a_fuzzy_untranslated_missing_or_unfaithful_message_fails(templates, locales, lang, change, says):
    msgid = spoil(locales, lang, change)
    found = checks.problems_of(lang, templates, locales, only=[LESSON])
    assert any(says in line and (repr(msgid[:70]) in line or says == "missing") for line in found), found[:5]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_changed_english_sentence_shows_its_old_translation_nowhere(templates, locales, lang, tmp_path):
    """The English of one paragraph changes: its catalog entry is stale and the new message missing, and
    the edition refuses to build rather than show the old translation (the site shows the English)."""
    changed = copy.deepcopy(templates)
    template = changed[LESSON]
    old = next(m for m in template if m.id and messages.has_words(m.id) and "$" in m.id)
    template.delete(old.id)
    template.add(old.id + " (changed)")
    found = checks.problems_of(lang, changed, locales, only=[LESSON])
    mine = [line.rsplit(": ", 1)[-1] for line in found if repr(old.id[:70]) in line]
    assert sorted(mine) == ["missing (make catalogs)",
                            "stale, the English page has no such message (make catalogs)"]

    english = ROOT / f"{LESSON}.ipynb"
    nb = json.loads(english.read_text())
    for cell in (c for c in nb["cells"] if c["cell_type"] == "markdown"):
        text = "".join(cell["source"])
        block = next((b for b in messages.text_blocks(text) if messages.message_of(b[3]) == old.id), None)
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
        with pytest.raises(editions.MissingTranslation, match="no translation of"):
            editions.edition_notebook(path, lang, links, f"editions/{lang}/{english.name}", locales)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_committed_edition_is_the_one_its_catalogs_build(lang, tmp_path):
    written = editions.write_edition(lang, out=tmp_path)
    edition = editions.EDITIONS / lang
    committed = sorted(p.relative_to(edition) for p in edition.rglob("*") if p.is_file())
    assert sorted(p.relative_to(tmp_path) for p in written) == committed
    stale = [str(p) for p in committed if (tmp_path / p).read_bytes() != (edition / p).read_bytes()]
    assert not stale, f"editions/{lang}/ is not what its catalogs build (make edition LANG={lang}): {stale}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_an_editions_code_cells_are_the_english_ones_byte_for_byte(lang):
    for english in site_pages.lessons(ROOT):
        en = json.loads(english.read_text())
        ed = json.loads((editions.EDITIONS / lang / "notebooks" / english.name).read_text())
        assert editions.edition_differences(en, ed) == [], english.name
        pairs = [(a, b) for a, b in zip(en["cells"], ed["cells"], strict=True)
                 if a["cell_type"] == "markdown"]
        translated = sum(a["source"] != b["source"] for a, b in pairs)
        assert translated >= 0.9 * len(pairs), f"{english.name}: {translated} of {len(pairs)} translated"
    spoiled = copy.deepcopy(ed)
    code = next(c for c in spoiled["cells"] if c["cell_type"] == "code")
    code["source"] = ["# x\n", *code["source"]]
    where = spoiled["cells"].index(code) + 1
    assert editions.edition_differences(en, spoiled) == [
        f"cell {where}: the code cell is not the English one"]
    spoiled = copy.deepcopy(ed)
    text = next(c for c in spoiled["cells"] if c["cell_type"] == "markdown" and "$" in "".join(c["source"]))
    text["source"] = [messages.MATH.sub("$x$", "".join(text["source"]), count=1)]
    assert any("equations differ" in p for p in editions.edition_differences(en, spoiled))


def test_translated_markdown_keeps_its_layout():
    text = ("## A heading\n\nA paragraph\nover two lines with $x_t$ and `code`.\n\n- an item\n  that wraps\n"
            "- [a link](notebooks/02_linear_attention.ipynb)\n\n> a quote\n\n| a | b |\n|---|---|\n"
            "| one cell | `x` |\n\n$$\nS_t = S_{t-1}\n$$\n\n```python\nprint('a paragraph')\n```\n")
    out = messages.translate_markdown(text, lambda content: "«" + " ".join(content.split()) + "»")
    assert out == ("## «A heading»\n\n«A paragraph over two lines with $x_t$ and `code`.»\n\n"
                   "- «an item that wraps»\n- «[a link](notebooks/02_linear_attention.ipynb)»\n\n"
                   "> «a quote»\n\n"
                   "| «a» | «b» |\n|---|---|\n| «one cell» | «`x`» |\n\n$$\nS_t = S_{t-1}\n$$\n\n"
                   "```python\nprint('a paragraph')\n```\n")


def test_a_translation_breaking_its_markup_or_its_conventions_is_named():
    assert checks.kept_verbatim("**Bold.** Then text.", "**粗体**。然后是文本。") == []
    assert "markup" in checks.kept_verbatim("**Bold.** Then text.", "**粗体。**然后是文本。")[0]   # no bold
    assert "code" in checks.kept_verbatim("Call `f`.", "调用 f。")[0]
    assert "list item" in checks.kept_verbatim("1. The recurrence", "1. 递推形式")[0]   # a heading, by itself
    assert checks.kept_verbatim("1. The recurrence", "1\\. 递推形式") == []
    assert checks.conventions("zh_CN", "状态 $S$ 很大（对 `K` 而言），对吗？") == []
    found = checks.conventions("zh_CN", "状态S很大(对吧),真的")
    assert len(found) == 3, found        # no space before S, ASCII parentheses, an ASCII comma
    assert checks.conventions("de", "0,25 von 1024 und 16\u202f384 Tokens, `1,024` im Code",
                              "0.25 of 1,024 and 16,384 tokens, `1,024` in code") == []
    assert "thousands comma" in checks.conventions("de", "ab 1,024 Tokens", "from 1,024 tokens")[0]
    assert checks.conventions("de", "0,001 bis 0,1", "0.001 to 0.1") == []     # decimals, not thousands


def test_a_decimal_point_in_german_prose_is_named_and_nothing_else():
    """German writes 2,8 Billionen: a decimal point in the prose is named; a version, an exercise, an
    arXiv number, a paper's section, a formula and code are not decimals of the prose."""
    for wrong in ("etwa 2.8 Billionen", "4.8 TB/s", "38.6M Parameter", "Übung 11.2 bei 11.2% der Fälle"):
        found = checks.conventions("de", wrong)
        assert found and "decimal point" in found[0], wrong
    right = ("etwa 2,8 Billionen, Python ≥ 3.10, triton 3.4 und 3.9, torch 2.13.0, Übung 05a.1 und 11.2, "
             "arXiv 2510.26692, Abschnitt 3.3 des Papers, $\\alpha = 0.95$, `lr=1e-3`, 127.0.0.1")
    assert checks.conventions("de", right) == []


def test_german_terms_the_glossary_settled_are_kept():
    """A decayed state is gedämpft (it klingt ab), not zerfallen (disintegrated); the methods are the
    Gated-Delta-Regel and Gated MLA; shared experts are Shared Experts, not geteilte (split) ones."""
    for wrong in ("der zerfallene Zustand", "Der Zustand zerfällt über den Chunk",
                  "die gesteuerte Delta-Regel", "ein gegatetes MLA", "2 geteilte Experten"):
        assert any(line.startswith("write ") for line in checks.conventions("de", wrong)), wrong
    assert checks.conventions("de", "Der gedämpfte Zustand klingt ab; die Gated-Delta-Regel; Gated MLA; "
                                    "2 Shared Experts; der Zerfall pro Kanal") == []


def test_chinese_terms_the_glossary_settled_are_kept():
    for wrong in ("潜在专家", "潜在 MoE 层", "tile（分块瓦片）"):
        assert any(line.startswith("write ") for line in checks.conventions("zh_CN", wrong)), wrong
    right = "潜空间专家与潜空间 MoE；多头潜在注意力缓存潜在向量；tile（瓦片）"
    assert checks.conventions("zh_CN", right) == []


def test_a_bold_span_that_starts_with_punctuation_is_named():
    """`**。mla**` renders bold (the markup counts agree) but the bold starts with the full stop of the
    sentence before: the check reads which text is bold, not only how many bold spans there are."""
    english, spoiled = "`a`. **mla**: lesson 08's.", "`a`**。mla**：第 08 课的。"
    assert checks.kept_verbatim(english, spoiled) == []
    assert any("starts with punctuation" in line for line in checks.conventions("zh_CN", spoiled))
    assert checks.conventions("zh_CN", "`a`。**mla**：第 08 课的。") == []
    german = checks.conventions("de", "der Wert **, gedämpft**")
    assert any("starts with punctuation" in line for line in german)


def test_a_long_chinese_sentence_is_named():
    """At most 150 characters (a formula or code counts as one) and fewer than six 的 per sentence."""
    short = "状态 $S \\in \\mathbb{R}^{d_k \\times d_v}$ 的大小固定。"
    assert checks.long_sentences(short) == [] and checks.conventions("zh_CN", short) == []
    long = "模型在这里计算一个数，" * 16 + "到此结束。"         # 181 characters, no 的
    assert checks.long_sentences(long) == [long]
    assert "a sentence of 181" in checks.conventions("zh_CN", long)[0]
    heavy = "模型的层的头的键的值的维度的大小。"
    assert checks.long_sentences(heavy) == [heavy]
    assert checks.long_sentences(long.replace("，", "。")) == []     # the same words, split


def test_the_english_sources_group_thousands_in_math_with_thin_spaces():
    """`$49{,}152$` reads as a decimal in German (the math is shared by every edition): thousands in an
    equation are grouped with a thin space, `49\\,152`, or not at all."""
    def grouped_with_commas(text):
        return [m for m in messages.MATH.findall(text) if re.search(r"\d\{?,\}?\d{3}(?!\d)", m)]

    texts = [(path.name, "".join(c["source"])) for path in site_pages.lessons(ROOT)
             for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"]
    texts += [(name, (ROOT / name).read_text()) for name in ("README.md", "docs/teaching.md",
                                                             "benchmarks/README.md")]
    found = [(name, m) for name, text in texts for m in grouped_with_commas(text)]
    assert not found, found
    assert grouped_with_commas("$12 \\times 64 \\times 64 = 49{,}152$ and $1,024$") == [
        "$12 \\times 64 \\times 64 = 49{,}152$", "$1,024$"]
    assert grouped_with_commas("$49\\,152$ and $f(a, b)$ and $0,5$") == []


def lesson_titles(lang):
    """{notebook: (its title in the edition README's lesson table, its notebook's first heading, the
    lesson's number left out)} of `lang`'s edition (English: the repository's)."""
    base = ROOT if lang == "en" else editions.EDITIONS / lang
    readme = (base / "README.md").read_text()
    table = {name: title for title, name in
             re.findall(r"\*\*\[([^\]]+)\]\((?:\.\./\.\./)?notebooks/([^)]+)\)\*\*", readme)}
    if lang == "en":        # the README's own table names the files; the site's (and the editions') titles
        table = {name: title for title, name in re.findall(r"\*\*\[([^\]]+)\]\(notebooks/([^)]+)\)\*\*",
                                                           site_pages.lesson_table(
                                                               site_pages.readme_sections(readme)[1]["Lessons"],
                                                               site_pages.lessons(ROOT)))}
    out = {}
    for path in sorted((base / "notebooks").glob("*.ipynb")):
        heading = "".join(json.loads(path.read_text())["cells"][0]["source"]).splitlines()[0]
        out[path.name] = (table.get(path.name), re.split(r"——| – | — ", heading.lstrip("# "), maxsplit=1)[-1])
    return out


@pytest.mark.parametrize("lang", ["en", *LANGUAGES])
def test_a_lessons_title_is_the_same_in_the_readme_and_in_the_lesson(lang):
    titles = lesson_titles(lang)
    assert len(titles) == len(site_pages.lessons(ROOT))
    differ = {name: pair for name, pair in titles.items() if pair[0] != pair[1]}
    assert not differ, f"{lang}: the README's lesson table and the notebook's title differ: {differ}"


def test_an_editions_links_open_files_that_exist():
    """Every relative link of an edition's README and teaching guide opens a file: the edition's own
    (its notebooks, its guide) or the repository's."""
    def broken(path):
        text = path.read_text()
        targets = [m[2] for pattern in site_pages.TARGETS for m in pattern.finditer(text)]
        return [t for t in targets if not re.match(r"^[a-zA-Z][\w+.-]*:|#", t)
                and not (path.parent / t.partition("#")[0]).exists()]

    for lang in LANGUAGES:
        for rel in ("README.md", editions.GUIDE):
            assert broken(editions.EDITIONS / lang / rel) == [], f"{lang}/{rel}"
    spoiled = editions.EDITIONS / LANGUAGES[0] / "README.md"
    assert broken(spoiled) == [] and "../../docs/glossary" in spoiled.read_text()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_an_editions_readme_is_the_whole_readme_and_says_what_stays_english(lang):
    english = (ROOT / "README.md").read_text()
    readme = (editions.EDITIONS / lang / "README.md").read_text()
    assert len(re.findall(r"^##+ ", readme, flags=re.M)) == len(re.findall(r"^##+ ", english, flags=re.M))
    note = po.translations_of(lang, [editions.README])[messages.messages_of(editions.EDITION_NOTE)[0]]
    assert note.replace("{glossary}", f"../../docs/glossary.{lang}.md") in readme
    assert f"](../../docs/glossary.{lang}.md)" in readme
    guide = (editions.EDITIONS / lang / editions.GUIDE).read_text()
    assert len(re.findall(r"^## ", guide, flags=re.M)) == len(re.findall(r"^## ", (ROOT / editions.GUIDE)
                                                                             .read_text(), flags=re.M))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_student_edition_in_a_language_has_its_prose_and_the_english_checks(lang, tmp_path):
    notebooks = student_edition.build(tmp_path / "student", lang=lang)
    for path in notebooks:
        student = json.loads(path.read_text())
        student["cells"] = [c for c in student["cells"] if "kimik3" not in c["metadata"]]  # the question
        edition = json.loads((editions.EDITIONS / lang / "notebooks" / path.name).read_text())
        english = json.loads((ROOT / "notebooks" / path.name).read_text())
        for s, ed, en in zip(student["cells"], edition["cells"], english["cells"], strict=True):
            if s["cell_type"] == "markdown":
                assert s["source"] == [line.replace(f"editions/{lang}/notebooks/", "notebooks/")
                                       for line in ed["source"]], path.name
            else:
                assert s["source"] == en["source"] and s["outputs"] == [], path.name
    readme = " ".join((tmp_path / "student" / "README.md").read_text().split())
    english = [m for m in catalogs.student_messages()
               if len(m.split()) > 3 and messages.PLACEHOLDER.sub("", m) in readme]
    assert not english, f"the {lang} student edition's README has English left: {english[:3]}"
    comma = SERIES_COMMA[lang]                  # the lesson list joined as the language joins a list
    assert comma.join(["03", "05b", "06", "07a"]) in readme and "{" not in readme   # placeholders filled
    assert lang == "de" or "03, 05b" not in readme
