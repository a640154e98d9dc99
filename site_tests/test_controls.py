"""Negative controls: each check of sitecheck.py, test_front_door.py and test_navigation.py fails on a
page that breaks that one thing, so a pass means something. The browser's control pages are a built
lesson page (one with formulas, figures and a widget) with one change, served beside it in place of a
file (SiteServer.overrides), so that its relative links still resolve; the unchanged copy passes. The
HTML checks get a built page with one change, the catalog check a catalog with one gap. Then the search,
the HTML scan and the build's -W."""

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
COPYBUTTON = re.compile(r'<script src="[^"]*_static/copybutton\.js[^"]*"></script>')
SITE_JS = re.compile(r'<script src="[^"]*_static/site\.js[^"]*"></script>')
LONG = "x = " + " + ".join(["alpha"] * 60)
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
    "raw_table": (lambda h: _inject(h, "<p>| form | seconds |<br>|---|---|<br>| chunked | 0.1 |</p>"),
                  {"table"}),
    "no_copy_button": (lambda h: COPYBUTTON.sub("", h, count=1), {"copy"}),
    "code_scrolls": (lambda h: _inject(h, '<div class="highlight"><pre style="white-space: pre; '
                                          f'overflow-x: auto">{LONG}</pre></div>'),
                     {"code-width"}),
    "page_too_wide": (lambda h: _inject(h, '<div style="width: 700px">a line wider than a phone</div>'),
                      {"sideways"}),
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


# The fault as the issue found it: the theme's script binds the first ☰ and contents buttons of the page,
# and a hidden pair came first (the theme's own top bar). Then a language menu so wide the header wraps.
NAVIGATION_CONTROLS = {
    "hidden_toggles_first": lambda h: h.replace(
        '<div class="bd-container">', '<div style="display: none"><button class="sidebar-toggle '
        'primary-toggle"></button><button class="sidebar-toggle secondary-toggle"></button></div>'
        '<div class="bd-container">', 1),
    "header_wraps": lambda h: _inject(h, "<style>.bd-header-article .header-article-items__end "
                                         "{ flex-wrap: wrap !important; } "
                                         ".language-switch { min-width: 70vw; }</style>"),
}


@pytest.mark.parametrize("name", NAVIGATION_CONTROLS)
@pytest.mark.parametrize("width", [390, 1400])
def test_a_broken_header_fails_the_navigation_check(name, width, site, browser, server):
    html = (site / "notebooks" / f"{BASE.stem}.html").read_text()
    changed = NAVIGATION_CONTROLS[name](html)
    assert changed != html
    path = f"notebooks/control_nav_{name}.html"
    server.overrides[f"/{path}"] = changed.encode()
    found = sitecheck.navigation(browser, server, path, width)
    what = "does not" if name == "hidden_toggles_first" else "row"
    assert any(what in problem for problem in found), found


def test_the_language_switch_without_the_sites_script_loses_the_section(site, browser, server):
    from test_navigation import LESSON, SECTION

    html = (site / LESSON).read_text()
    changed = SITE_JS.sub("", html, count=1)
    assert changed != html
    path = LESSON.replace(".html", "_control_switch.html")
    server.overrides[f"/{path}"] = changed.encode()
    url = sitecheck.switch_language(browser, server, path, SECTION, "de")
    assert not url.endswith(f"#{SECTION}"), url


def test_english_interface_text_left_in_a_translation_is_found():
    english = {"Open in Colab", "Download the notebook", "Colab", "English", "Ctrl", "kimik3-lessons",
               "Run All"}
    translated = {"In Colab öffnen", "Download the notebook", "Colab", "English", "Ctrl", "kimik3-lessons",
                  "Run All"}
    assert sitecheck.english_left(english, translated) == ["Download the notebook"]
    assert sitecheck.english_left(english, english - {"Download the notebook", "Open in Colab"}) == []


def test_a_catalog_without_a_string_or_with_its_placeholders_changed_fails():
    from babel.messages.catalog import Catalog
    from test_navigation import catalog_problems

    catalog = Catalog(locale="de")
    catalog.add("Language", "Sprache")
    catalog.add("{lines} lines", "Zeilen")
    assert catalog_problems(["Language"], catalog) == []
    assert catalog_problems(["Language", "Time:"], catalog) == ["no translation of 'Time:'"]
    assert "placeholders" in catalog_problems(["{lines} lines"], catalog)[0]


# ---------------------------------------------------------------------------------------------------
# The HTML checks of test_front_door.py, each on a built page with one fault


def _once(html, old, new):
    assert old in html, old[:80]
    return html.replace(old, new, 1)


def test_a_landing_page_that_is_no_front_door_fails(site):
    from test_front_door import landing_problems

    html = (site / "index.html").read_text()
    assert landing_problems(html) == []
    head, article = html.split("<article", 1)
    h1 = re.search(r"<h1>([^<]*)", article)[1]
    svg_box = re.search(r'<a href="notebooks/08_mla\.html" class="map-lesson">.*?</a>', html, re.S)[0]
    thumbnail = re.search(r'<a class="reference internal" href="notebooks/01_gpt2_kv_cache\.html">'
                          r'<span class="std std-doc"><img alt="key figure"', html)[0]
    run = re.search(r'<section id="how-to-run-a-lesson">.*?</section>', html, re.S)[0]
    faults = {
        "the title is not in words": head + "<article" + _once(article, f"<h1>{h1}", "<h1>kimik3-lessons"),
        "no start-here box": _once(html, "start-here", "start-somewhere"),
        "the lesson map's boxes open": _once(html, svg_box, ""),
        "a link inside a link": _once(html, thumbnail, f'<a href="#">{thumbnail}'),
        "how to run comes after": _once(_once(html, run, ""), "</article>", run + "</article>"),
    }
    for says, broken in faults.items():
        found = landing_problems(broken)
        assert any(says in problem for problem in found), (says, found)


def test_a_lesson_header_with_a_fault_fails(site):
    from test_front_door import header_problems

    stem = "06_gated_deltanet"
    html = (site / "notebooks" / f"{stem}.html").read_text()
    assert header_problems(html, stem) == []
    faults = {
        "learning goals shown": re.sub(r"(<div class=\"lesson-goals[^>]*>.*?<ol[^>]*>)\s*<li>.*?</li>", r"\1",
                                       html, count=1, flags=re.S),
        "builds on": re.sub(r'(<p class="lesson-builds-on">.*?href=")05b_deltanet_chunked',
                            r"\g<1>04_fast_weights", html, count=1, flags=re.S),
        "kaggle button": _once(html, "kaggle.com/kernels/welcome?src=", "kaggle.com/code?src="),
        "does not download": _once(html, f' download="{stem}.ipynb"', ""),
        "its time": _once(html, "90 minutes", "ninety minutes"),
        "no lesson header": _once(html, 'class="lesson-header', 'class="lesson-top'),
    }
    for says, broken in faults.items():
        assert broken != html, says
        found = header_problems(broken, stem)
        assert any(says in problem for problem in found), (says, found)


def test_outputs_shown_badly_fail(site):
    from test_front_door import diff_problems, output_problems

    nb = ROOT / "notebooks" / "06_gated_deltanet.ipynb"
    html = (site / "notebooks" / f"{nb.stem}.html").read_text()
    assert output_problems(html, nb) == [] and diff_problems(html) == []
    img = re.search(r'<img alt="[^"]*" src="(\.\./_images/[0-9a-f]+\.png)"[^>]*>', html)
    faults = {
        "markdown table left as text": _inject(html, "<p>| a | b |</p><p>|---|---|</p>"),
        "cells with their output to fold": _once(html, '<details class="kimik3-fold fold-output">', "<div>"),
        "shown twice": _inject(html, f'<div class="cell_output">{img[0]}</div>'),
        "says nothing": _once(html, img[0], img[0].replace(re.search(r'alt="[^"]*"', img[0])[0],
                                                            f'alt="{img[1]}"')),
        "highlighted as Python": html.replace("highlight-python", "highlight-none"),
    }
    for says, broken in faults.items():
        found = output_problems(broken, nb)
        assert any(says in problem for problem in found), (says, found)
    assert diff_problems(re.sub(r'class="g[id]"', 'class="w"', html)) != []


@pytest.mark.parametrize("prefix, quoted", [("", "Quiet: load 0.88, 1.39, 3.18 before."),
                                             ("de/", "Ruhig: Last 0,88; 1,39; 3,18 vorher.")])
def test_a_benchmarks_page_that_reads_as_a_lab_log_fails(site, prefix, quoted):
    from test_front_door import LOAD_AVERAGES, benchmark_problems

    readers = (site / prefix / "benchmarks" / "README.html").read_text()
    log = (site / prefix / "benchmarks" / "maintainers.html").read_text()
    assert benchmark_problems(readers, log) == []
    bar = re.search(r'<div class="bench-row">.*?</span></div></div>', readers, re.S)[0]
    faults = {
        "bars in the chart": (_once(readers, bar, ""), log),
        "load averages": (_inject(readers, f"<p>{quoted}</p>"), log),
        "how to rerun": (readers.replace('make</span> <span class="pre">bench', "make</span> <span>x"), log),
        "does not have the lab log": (readers, LOAD_AVERAGES.sub("", log)),
    }
    for says, (page, maintainers) in faults.items():
        found = benchmark_problems(page, maintainers)
        assert any(says in problem for problem in found), (says, found)


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
