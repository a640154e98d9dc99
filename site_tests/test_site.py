"""The built site (`make site`) as a reader meets it: every page opened in headless Chromium and checked
(sitecheck.py says what), the landing page's lesson table, the search box, and the HTML files read for a
resource from another host or a broken internal link."""

import re
from pathlib import Path

import pytest
import sitecheck

from conftest import ROOT, SITE, lesson_links, lessons, widget_count

# Every page of the site: the HTML files outside the theme's and Sphinx's own folders (_static, ...).
PAGES = sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
               if not any(part.startswith("_") for part in p.relative_to(SITE).parts))


def expected(path):
    """What a page must show beyond the checks every page gets: a lesson page, its Colab badge, the
    link to its notebook file and one default picture with its line per widget."""
    match = re.fullmatch(r"notebooks/(.+)\.html", path)
    if not match:
        return {}
    notebook = ROOT / "notebooks" / f"{match[1]}.ipynb"
    colab, file = lesson_links(match[1])
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


@pytest.mark.parametrize("path", PAGES)
def test_page_reads_as_it_should(path, check):
    report = check(path, **expected(path))
    if report.problems:
        pytest.fail(report.summary(), pytrace=False)


def title_word(notebook):
    """A word of a lesson's title that a reader would search for: its longest."""
    import json

    first = "".join(json.loads(Path(notebook).read_text())["cells"][0]["source"]).splitlines()[0]
    return max(re.findall(r"[A-Za-z]{5,}", first.split("—", 1)[-1]), key=len)


def search_problem(browser, server, word, page):
    found = sitecheck.search(browser, server, word)
    return None if page in found else f"searching {word!r} lists {found[:8]}, not {page}"


def test_search_finds_a_lesson_by_a_word_of_its_title(browser, server):
    lesson = lessons()[4]
    word = title_word(lesson)
    problem = search_problem(browser, server, word, f"notebooks/{lesson.stem}.html")
    assert problem is None, problem
