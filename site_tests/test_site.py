"""The built site (`make site`) as a reader meets it: every page opened in headless Chromium and checked
(sitecheck.py says what), the landing page's lesson table, the search box, and the HTML files read for a
resource from another host or a broken internal link. Every page in every translation too: opened and
checked the same way, in its language, its prose translated, its switch leading to the page in every
language, its lessons opening the edition's notebooks."""

import re
from pathlib import Path

import pytest
import sitecheck

from conftest import LANGUAGES, ROOT, SITE, lesson_links, lessons, widget_count

# Every page of the English site: the HTML files outside the theme's and Sphinx's own folders (_static,
# ...) and outside the translations' folders; each translation has the same pages under <lang>/.
PAGES = sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
               if not any(part.startswith("_") for part in p.relative_to(SITE).parts)
               and p.relative_to(SITE).parts[0] not in LANGUAGES)
TRANSLATED = [f"{lang}/{page}" for lang in LANGUAGES for page in PAGES]
HAN = re.compile(r"[\u4e00-\u9fff]")


def expected(path):
    """What a page must show beyond the checks every page gets: a lesson page, its Colab badge, the
    link to its notebook file (a translation's: its edition's) and one default picture with its line per
    widget."""
    match = re.fullmatch(rf"(?:({'|'.join(LANGUAGES)})/)?notebooks/(.+)\.html", path)
    if not match:
        return {}
    notebook = ROOT / "notebooks" / f"{match[2]}.ipynb"
    colab, file = lesson_links(match[2], match[1])
    return {"colab": colab, "notebook": file, "widgets": widget_count(notebook)}


def test_every_lesson_is_a_page_in_course_order(site):
    pages = [p for p in PAGES if p.startswith("notebooks/")]
    assert pages == [f"notebooks/{nb.stem}.html" for nb in lessons()]
    index = (site / "index.html").read_text()
    nav = re.search(r'<nav class="[^"]*bd-docs-nav.*?</nav>', index, re.S)[0]
    order = [href for href in re.findall(r'href="([^"#]+)"', nav) if href.startswith("notebooks/")]
    assert order == pages, "the table of contents does not list the lessons in course order"
    table = index[index.index("<table"):index.index("</table>")]
    for nb in lessons():
        colab, _ = lesson_links(nb.stem)
        assert f'href="notebooks/{nb.stem}.html"' in table and colab in table, \
            f"the landing page's lesson table has no row for {nb.name} with its page and its Colab badge"
    for page in ("running.html", "docs/teaching.html", "benchmarks/README.html"):
        assert page in PAGES and f'href="{page}"' in nav, page


def test_no_resource_from_another_host_and_no_broken_internal_link(site):
    problems = sitecheck.static_problems(site)
    assert not problems, "\n".join(f"{file}: {problem}" for file, problem in problems)


@pytest.mark.parametrize("path", PAGES + TRANSLATED)
def test_page_reads_as_it_should(path, check):
    report = check(path, **expected(path))
    if report.problems:
        pytest.fail(report.summary(), pytrace=False)


def title_word(notebook):
    """A word of a lesson's title that a reader would search for: its longest."""
    import json

    first = "".join(json.loads(Path(notebook).read_text())["cells"][0]["source"]).splitlines()[0]
    return max(re.findall(r"[A-Za-z]{5,}", first.split("—", 1)[-1]), key=len)


def search_problem(browser, server, word, page, prefix=""):
    found = sitecheck.search(browser, server, word, prefix=prefix)
    return None if page in found else f"searching {word!r} lists {found[:8]}, not {page}"


def test_search_finds_a_lesson_by_a_word_of_its_title(browser, server):
    lesson = lessons()[4]
    word = title_word(lesson)
    problem = search_problem(browser, server, word, f"notebooks/{lesson.stem}.html")
    assert problem is None, problem


def translation_problems(site, lang, page):
    """What is wrong with the translation of English page `page` in `lang`, read from the HTML: not there,
    not marked as that language, English prose left in it, a switch that does not lead to the page in
    every language (and back), or, in Chinese, too little Chinese."""
    path = site / lang / page
    if not path.exists():
        return [f"{lang}/{page}: missing"]
    english, translated = (site / page).read_text(), path.read_text()
    out = []
    if f'<html lang="{lang.replace("_", "-")}"' not in translated:
        out.append(f"{lang}/{page}: not marked lang={lang.replace('_', '-')}")
    out += [f"{lang}/{page}: English left as it is: {p[:100]!r}"
            for p in sitecheck.untranslated(english, translated)]
    switch = sitecheck.language_links(translated)
    for other in ["en", *LANGUAGES]:
        if other == lang:
            continue
        target = (path.parent / switch.get(other.replace("_", "-"), "#")).resolve()
        want = (site / page if other == "en" else site / other / page).resolve()
        if target != want:
            out.append(f"{lang}/{page}: its switch to {other} leads to {switch.get(other.replace('_', '-'))}")
    back = sitecheck.language_links(english).get(lang.replace("_", "-"), "#")
    if (site / page).parent.joinpath(back).resolve() != path.resolve():
        out.append(f"{page}: its switch to {lang} leads to {back}")
    if lang == "zh_CN":
        prose = "".join(sitecheck.paragraphs(translated))
        chinese = len(HAN.findall(prose))
        letters = len(re.findall(r"[A-Za-z]", prose)) + chinese
        if letters and chinese < 0.3 * letters:
            out.append(f"{lang}/{page}: only {chinese} of {letters} letters of its prose Chinese")
    return out


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_page_has_its_translation_in_its_language_with_a_switch(site, lang):
    found = [problem for page in PAGES for problem in translation_problems(site, lang, page)]
    assert not found, "\n".join(found[:30])


# A word of lesson 05a's translated title or text, as a reader of that language would type it: in Chinese,
# a word the search must first cut out of a sentence (Sphinx does it with jieba); in German, a name.
SEARCHES = {"zh_CN": "递推", "de": "DeltaNet"}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_translations_search_finds_a_lesson(browser, server, lang):
    page = f"{lang}/notebooks/05a_delta_rule.html"
    problem = search_problem(browser, server, SEARCHES[lang], page, f"{lang}/")
    assert problem is None, problem
