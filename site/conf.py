"""Sphinx configuration of the course website (`make site`; the pages come from tools/site_pages.py).

sphinx-build -c site build/site-work/src build/site: the sources are generated into a scratch folder,
this folder holds the configuration, the site's stylesheet and its Colab badge. The notebooks are shown
as committed (MyST-NB with execution off). Nothing is loaded from another host: MathJax 3 comes from the
sphinx-mathjax-offline package and is served with the site, widgets are replaced by their default
picture (so no widget JavaScript), and the theme's assets are its own.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import site_pages  # noqa: E402

REPO, BRANCH = site_pages.repository(ROOT)

project = "kimik3-lessons"
author = "the kimik3-lessons authors"
copyright = "the kimik3-lessons authors (MIT licence)"
extensions = ["myst_nb", "sphinx-mathjax-offline"]   # the second serves MathJax 3 from _static/mathjax

# The notebooks are committed executed: show their outputs, never run them.
nb_execution_mode = "off"
nb_ipywidgets_js = {}              # no widget JavaScript from a CDN: widgets are pictures here
nb_merge_streams = True            # one block per cell for what it printed
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "attrs_inline"]
myst_heading_anchors = 3           # links to a section (#quick-start) resolve

exclude_patterns = []
html_theme = "sphinx_book_theme"
html_title = "kimik3-lessons"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_copy_source = False           # the notebook to download is the repository's, linked on every page
html_show_sourcelink = False
html_theme_options = {
    "repository_url": f"https://github.com/{REPO}",
    "repository_branch": BRANCH,
    "path_to_docs": "",            # a page's path in the site is its path in the repository
    "use_repository_button": True,
    "use_download_button": False,
    "launch_buttons": {"colab_url": "https://colab.research.google.com"},
    "home_page_in_toc": True,
    "show_toc_level": 2,
    # the landing page's lesson table takes the width of the page's own table of contents
    "secondary_sidebar_items": {"**": ["page-toc"], "index": []},
}
# The theme's colour mode (light, dark or the reader's system setting); left empty, its script logs an error.
html_context = {"default_mode": "auto"}

# Translations (docs/translations.md): `make catalogs` extracts every page's messages with the gettext
# builder, one catalog per page, and sphinx-intl updates locales/<lang>/LC_MESSAGES/<page>.po; `make site`
# builds the English site at the root and each language under /<lang>/ from those catalogs.
locale_dirs = [str(ROOT / "locales")]
gettext_compact = False          # one catalog per page: notebooks/05a_delta_rule.po, docs/teaching.po, ...
gettext_location = False         # no line numbers: a catalog changes only when a message does
gettext_uuid = False
