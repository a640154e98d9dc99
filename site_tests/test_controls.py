"""Negative controls: each check of sitecheck.py fails on a page that breaks that one thing, so a pass
means something. The control pages are a built lesson page (one with formulas, figures and a widget)
with one change, served beside it in place of a file (SiteServer.overrides), so that its relative links
still resolve; the unchanged copy passes. Then the search, the HTML scan and the build's -W."""

import re
import subprocess
import sys

import pytest
import sitecheck
from test_site import search_problem

from conftest import ROOT, lesson_links, lessons, widget_count

BASE = next(nb for nb in lessons() if widget_count(nb))   # the first lesson with a widget
INJECT = "</article>"
MATHJAX = re.compile(r'<script[^>]*src="[^"]*mathjax/tex-chtml\.js[^"]*"[^>]*></script>')
COLAB, NOTEBOOK = lesson_links(BASE.stem)


def _inject(html, snippet):
    assert INJECT in html
    return html.replace(INJECT, snippet + INJECT, 1)


# name: (what breaks, the one kind of problem it must cause)
CONTROLS = {
    "ok": (lambda h: h, set()),
    "broken_image": (lambda h: _inject(h, '<img src="../_images/control-broken.png">'), {"figure"}),
    "missing_file": (lambda h: _inject(h, '<link rel="stylesheet" href="../_static/control-missing.css">'),
                     {"request"}),
    "console_error": (lambda h: _inject(h, '<script>console.error("an error a reader would see")</script>'),
                      {"console"}),
    "uncaught_exception": (lambda h: _inject(h, "<script>null.f()</script>"), {"console"}),
    "raw_math": (lambda h: _inject(h, "<p>a formula left raw: $S_t = S_{t-1}$</p>"), {"math"}),
    "no_mathjax": (lambda h: MATHJAX.sub("", h, count=1), {"math"}),
    "tex_error": (lambda h: _inject(h, r'<p><span class="math">\(\frac{1}\)</span></p>'), {"math"}),
    "external_request": (lambda h: _inject(h, '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js">'
                                              "</script>"), {"external"}),
    "no_colab_badge": (lambda h: h.replace(f'href="{COLAB}"', 'href="#"'), {"colab"}),
    "no_notebook_link": (lambda h: h.replace(f'href="{NOTEBOOK}"', 'href="#"'), {"colab"}),
    "widget_without_line": (lambda h: h.replace("widget-default", "widget-gone", 1), {"widget"}),
}


@pytest.mark.parametrize("name", CONTROLS)
def test_control_page_fails_the_check_it_breaks(name, site, server, check):
    change, kinds = CONTROLS[name]
    html = (site / "notebooks" / f"{BASE.stem}.html").read_text()
    changed = change(html)
    assert (changed != html) == bool(kinds), f"the control {name} changed nothing in the page"
    server.overrides["/_images/control-broken.png"] = b"not a PNG file"
    path = f"notebooks/control_{name}.html"
    server.overrides[f"/{path}"] = changed.encode()
    report = check(path, screenshots=False, colab=COLAB, notebook=NOTEBOOK, widgets=widget_count(BASE))
    assert report.kinds() == kinds, report.summary()


def test_search_for_a_word_no_page_has_finds_nothing(browser, server):
    assert search_problem(browser, server, "qzxjvkwq", "notebooks/01_gpt2_kv_cache.html") is not None


def test_the_html_scan_finds_a_foreign_resource_and_broken_links(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="sub/page.html#there">ok</a><a href="sub/page.html#nowhere">bad anchor</a>'
        '<a href="gone.html">missing</a><a href="https://example.org/">a link out is fine</a>'
        '<script src="https://cdn.example.org/x.js"></script>')
    (tmp_path / "sub" / "page.html").write_text('<h1 id="there">t</h1><img src="//cdn.example.org/a.png">')
    (tmp_path / "sub" / "style.css").write_text('@font-face { src: url("https://f.example.org/a.woff"); }')
    found = sitecheck.static_problems(tmp_path)
    assert sorted(problem.split(":")[0] for _, problem in found) == [
        "links to a missing anchor", "links to a missing file", "loads a resource from another host",
        "loads a resource from another host", "loads a resource from another host"], found


def test_the_build_fails_on_a_broken_link(tmp_path):
    """`make site` runs Sphinx with -W: a link to a page that is not there stops the build."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "index.md").write_text("# Control\n\nA link to [a page not there](missing.md).\n")
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", "-c", str(ROOT / "site"),
               str(tmp_path / "src"), str(tmp_path / "out")]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode != 0 and "missing.md" in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("lang", ["zh_CN", "de"])
def test_a_translation_with_english_left_or_a_broken_switch_fails(site, tmp_path, lang):
    """A copy of one page in English and in every language, then one fault at a time in `lang`'s."""
    from test_site import translation_problems

    from conftest import LANGUAGES

    page = "running.html"
    for folder in ["", *LANGUAGES]:
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / page).write_text((site / folder / page).read_text())
    assert translation_problems(tmp_path, lang, page) == []
    translated = (site / lang / page).read_text()
    english = sitecheck.paragraphs((site / page).read_text())[1]
    faults = {
        "English left": _inject(translated, f"<p>{english}</p>"),
        "not marked": translated.replace(f'<html lang="{lang.replace("_", "-")}"', '<html lang="en"', 1),
        "switch to en": translated.replace('hreflang="en"', 'hreflang="xx"', 1),
    }
    for says, html in faults.items():
        assert html != translated, says
        (tmp_path / lang / page).write_text(html)
        found = translation_problems(tmp_path, lang, page)
        assert any(says in problem for problem in found), (says, found)
