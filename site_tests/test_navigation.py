"""The site worked as a reader works it, in headless Chromium: the header, ☰ and the contents button at a
phone's, a tablet's, a small laptop's and a desktop's width (sitecheck.navigation); the language switch
keeping the section being read; the interface text of each translation in its language; and the site's
interface catalogs complete for every string the site's code and templates write."""

import ast
import re
from urllib.parse import urlsplit

import pytest
import sitecheck

from conftest import LANGUAGES, ROOT
from tools.translations.po import read_catalog

LESSON = "notebooks/05a_delta_rule.html"
# Every width on an English lesson page; a translation's lesson page at a phone's and a tablet's width.
CASES = [("", w) for w in sitecheck.WIDTHS] + [(f"{lang}/", w) for lang, w in zip(LANGUAGES, (390, 800),
                                                                                     strict=False)]


@pytest.mark.parametrize("prefix, width", CASES, ids=[f"{p or 'en/'}{w}" for p, w in CASES])
def test_the_header_the_lesson_list_and_the_contents_work_at_every_width(browser, server, prefix, width):
    found = sitecheck.navigation(browser, server, prefix + LESSON, width)
    assert not found, "\n".join(found)


def test_the_landing_page_works_on_a_phone(browser, server):
    found = sitecheck.navigation(browser, server, "index.html", 390)
    assert not found, "\n".join(found)


SECTION = "the-wy-representation"


@pytest.mark.parametrize("start, to, scroll", [("", LANGUAGES[0], False), (f"{LANGUAGES[-1]}/", "en", True)],
                         ids=["by-anchor", "scrolled-to"])
def test_the_language_switch_keeps_the_section_being_read(browser, server, start, to, scroll):
    """From the English page to a translation, the section named in the address; from a translation back
    to English, the section scrolled to: the address the switch leads to keeps it."""
    url = sitecheck.switch_language(browser, server, start + LESSON, SECTION, to.replace("_", "-"),
                                    scroll=scroll)
    want = ("" if to == "en" else f"{to}/") + LESSON
    assert urlsplit(url).path == f"/{want}" and urlsplit(url).fragment == SECTION, (start, to, url)


# A lesson page (its header, folds and copy buttons), the benchmarks page (its chart) and the search page
# (what it says it found), in every translation.
# The search page has said how many pages it found (twelve or so: a number).
SEARCHED = "() => /\\d/.test(document.querySelector('#search-results .search-summary')?.textContent || '')"
INTERFACE = [(LESSON.replace("05a_delta_rule", "06_gated_deltanet"), None), ("benchmarks/README.html", None),
             ("search.html?q=DeltaNet", SEARCHED)]
ENGLISH = {}     # the English pages' interface text, read once per worker


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_interface_of_a_translation_is_in_its_language(browser, server, lang):
    found = []
    for path, ready in INTERFACE:
        if path not in ENGLISH:
            ENGLISH[path] = sitecheck.interface_text(browser, server, path, ready)
        english = ENGLISH[path]
        translated = sitecheck.interface_text(browser, server, f"{lang}/{path}", ready)
        assert len(english) > 20 and len(translated) > 20, (path, english, translated)
        found += [f"{lang}/{path}: {text!r}" for text in sitecheck.english_left(english, translated)]
    assert not found, "English interface text left in a translation:\n" + "\n".join(found)


# ---------------------------------------------------------------------------------------------------
# The interface catalogs, site/locales/<lang>/LC_MESSAGES/sphinx.po


def interface_strings(root=ROOT):
    """Every string the site's own code and templates hand to the translator: _("...") and interface("...")
    in site/*.py, {{ _('...') }} in site/_templates/."""
    found = []
    for path in sorted((root / "site").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("_", "interface") and \
                    node.args and isinstance(node.args[0], ast.Constant):
                found.append(node.args[0].value)
    for path in sorted((root / "site" / "_templates").rglob("*.html")):
        found += re.findall(r"""_\(\s*'([^']+)'\s*\)|_\(\s*"([^"]+)"\s*\)""", path.read_text())
    return list(dict.fromkeys(s if isinstance(s, str) else next(x for x in s if x) for s in found))


def catalog_problems(strings, catalog):
    """What catalog (a babel Catalog) lacks of `strings`: a translation, or the {placeholders} of one."""
    out = []
    for text in strings:
        message = catalog.get(text)
        if message is None or not message.string or message.fuzzy:
            out.append(f"no translation of {text!r}")
        elif sorted(re.findall(r"\{\w+\}", text)) != sorted(re.findall(r"\{\w+\}", message.string)):
            out.append(f"the translation of {text!r} changes its placeholders: {message.string!r}")
    return out


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_interface_catalog_translates_every_string_of_the_sites_code(lang):
    strings = interface_strings()
    assert len(strings) > 20 and "Open in Colab" in strings and "Language" in strings, strings
    catalog = read_catalog(ROOT / "site" / "locales" / lang / "LC_MESSAGES" / "sphinx.po")
    found = catalog_problems(strings, catalog)
    assert not found, f"site/locales/{lang}/LC_MESSAGES/sphinx.po:\n" + "\n".join(found)
