"""Sphinx configuration of the course website (`make site`; the pages come from tools/site_pages.py).

sphinx-build -c site build/site-work/src build/site: the sources are generated into a scratch folder,
this folder holds the configuration, the site's own extension (kimik3_site.py: lesson headers, the lesson
map, the GPU table, folds), its templates, stylesheet, script and interface catalogs, and its Colab
badge. The notebooks are shown as committed (MyST-NB with execution off); a markdown table a cell
displayed is rendered as a table (GitHub's flavour of markdown). Nothing is loaded from another host:
MathJax 3 comes from the sphinx-mathjax-offline package and is served with the site, widgets are
replaced by their default picture (so no widget JavaScript), and the theme's assets are its own.
"""

import os
import sys
from pathlib import Path

from tools import site_pages
from tools.translations import NAMES  # the languages, each by its own name
from tools.translations.po import read_catalog

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))   # kimik3_site.py, the site's own extension

REPO, BRANCH = site_pages.repository(ROOT)

project = "kimik3-lessons"
# sphinx-mathjax-offline serves MathJax 3 from _static/mathjax; sphinx_copybutton puts a copy button on
# every code block (its clipboard script is its own, served with the site).
extensions = ["myst_nb", "sphinx-mathjax-offline", "sphinx_copybutton", "kimik3_site"]

# The notebooks are committed executed: show their outputs, never run them.
nb_execution_mode = "off"
nb_ipywidgets_js = {}              # no widget JavaScript from a CDN: widgets are pictures here
nb_merge_streams = True            # one block per cell for what it printed
nb_render_markdown_format = "gfm"  # a markdown output's tables rendered as tables (the default has none)
# The copy button leaves out a Python prompt or a shell's "$ " at the start of a line.
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "attrs_inline"]
myst_heading_anchors = 3           # links to a section (#quick-start) resolve

exclude_patterns = []
html_theme = "sphinx_book_theme"
html_title = "kimik3-lessons"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_js_files = ["site.js"]
html_favicon = "_static/favicon.svg"
html_scaled_image_link = False     # a thumbnail opens its lesson (its link), not the bare picture
html_copy_source = False           # the notebook to download is the repository's, linked on every page
html_show_sourcelink = False
html_theme_options = {
    "repository_url": f"https://github.com/{REPO}",
    "repository_branch": BRANCH,
    "path_to_docs": "",            # a page's path in the site is its path in the repository
    "use_repository_button": True,
    "use_download_button": False,  # a lesson's header has its Colab, Kaggle and download buttons
    "home_page_in_toc": True,
    # The theme's own top bar, which this theme hides, left empty: its ☰ and contents buttons would be the
    # ones the theme's script binds (the first in the page), not the visible ones of the article's header.
    "navbar_persistent": [],
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],   # every page, the landing page too: its contents button works
}
# The theme's colour mode (light, dark or the reader's system setting); left empty, its script logs an error.
html_context = {"default_mode": "auto"}

# Translations (docs/translations.md). `make catalogs` extracts every page's messages with the gettext
# builder, one catalog per page (notebooks/05a_delta_rule.po, docs/teaching.po, ...), and sphinx-intl merges
# them into locales/<lang>/LC_MESSAGES/. `make site` builds the English site at the root and, with
# KIMIK3_SITE_LANG=<lang>, each translation under /<lang>/ from the same English pages and those catalogs
# (a copy of locales/ in KIMIK3_LOCALES, so the .mo files Sphinx compiles stay out of the repository).
LANGUAGES = NAMES                  # English, then each translation, by its own name
language = os.environ.get("KIMIK3_SITE_LANG") or "en"
if language not in LANGUAGES:
    raise ValueError(f"KIMIK3_SITE_LANG={language!r}: the site's languages are {', '.join(LANGUAGES)}")


def interface(message):
    """`message` in the site's language, from its interface catalog (site/locales), for the settings
    below that Sphinx reads before its translator is ready; the English when the catalog has none."""
    path = Path(__file__).resolve().parent / "locales" / language / "LC_MESSAGES" / "sphinx.po"
    if language == "en" or not path.exists():
        return message
    found = read_catalog(path).get(message)
    return found.string if found is not None and found.string and not found.fuzzy else message


copyright = interface("the kimik3-lessons authors (MIT licence)")
html_theme_options["search_bar_text"] = interface("Search...")
# The footer: the copyright line only (the theme's "By <author>" line is in a catalog of its own).
html_theme_options["footer_content_items"] = ["copyright.html", "last-updated.html"]
# The pages' catalogs first (kimik3_site.py reads the teaching guide's from there), then the site's
# interface catalog, site/locales/<lang>/LC_MESSAGES/sphinx.po, which Sphinx reads before its own.
locale_dirs = [os.environ.get("KIMIK3_LOCALES") or str(ROOT / "locales"),
               os.environ.get("KIMIK3_SITE_LOCALES") or str(ROOT / "site" / "locales")]
gettext_compact = False          # one catalog per page
gettext_location = False         # no line numbers: a catalog changes only when a message does
gettext_uuid = False
templates_path = ["_templates"]
html_theme_options["article_header_end"] = ["language-switch.html", "article-header-buttons.html"]
if language != "en":
    # A translated lesson page opens its edition's notebook: the theme's launch button, the Colab badge
    # and the link to the notebook file (translated_notebook_links, below).
    html_theme_options["path_to_docs"] = f"editions/{language}"
    html_js_files.append("translation-fixes.js")   # three faults of Sphinx 9's search in a translation
if language == "zh_CN":
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)   # Sphinx cuts Chinese words with jieba: not its log lines


def languages_of(pagename):
    """[(code, name, url)] of page `pagename` in each language, relative to the page itself: the English
    site at the root, the others under /<code>/."""
    up = "../" * pagename.count("/") + ("" if language == "en" else "../")
    return [(code, name, f"{up}{'' if code == 'en' else code + '/'}{pagename}.html")
            for code, name in LANGUAGES.items()]


def add_languages(app, pagename, templatename, context, doctree):
    context["kimik3_language"], context["kimik3_languages"] = language, languages_of(pagename)


def translated_notebook_links(app, doctree, docname):
    """In a translation, the links to a lesson's notebook (Colab, GitHub) open the edition's copy."""
    from docutils import nodes

    if language == "en":
        return
    own, edition = f"/blob/{BRANCH}/notebooks/", f"/blob/{BRANCH}/editions/{language}/notebooks/"
    for ref in list(doctree.findall(nodes.reference)):
        uri = ref.get("refuri", "")
        if REPO not in uri or own not in uri:
            continue
        ref["refuri"] = uri.replace(own, edition)
        for text in list(ref.findall(nodes.Text)):       # the link to the file names its path
            if text.startswith("notebooks/"):
                text.parent.replace(text, nodes.Text(f"editions/{language}/{text}"))


def setup(app):
    app.connect("html-page-context", add_languages)
    app.connect("doctree-resolved", translated_notebook_links)
