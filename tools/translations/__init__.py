"""The course in other languages (docs/translations.md): the catalogs, their checks, the editions.

    python -m tools.translations catalogs          # make catalogs: extract the English, update locales/
    python -m tools.translations check             # every catalog complete and in step (exit 1 if not)
    python -m tools.translations edition zh_CN     # make edition LANG=zh_CN: editions/zh_CN/
    python -m tools.translations lesson NB.ipynb   # make lesson: catalogs, both editions, what is left
    python -m tools.translations todo FILE.po      # what is left to translate in one catalog (JSON)
    python -m tools.translations apply FILE.po B.json   # write translations {"#n" or msgid: msgstr}

The English pages are the one source. `catalogs` writes the site's pages (tools/site_pages.py: the
lessons, the README's parts, the teaching guide, the benchmarks page), extracts their messages with
Sphinx's gettext builder (one template per page; a message per paragraph, heading, table cell, equation
or image text) and merges them into locales/<lang>/LC_MESSAGES/<page>.po with sphinx-intl. The site is
built from those catalogs by Sphinx itself (`make site`); an edition's notebooks, README and teaching
guide are the English ones with every paragraph translated through the same catalogs, code cells and
outputs untouched.

An English paragraph that changes is a new message: it has no translation until someone writes one
(sphinx-intl keeps the old one beside it, marked fuzzy, as a hint), and `check` fails until then, so a
change to the English prose carries its translations in the same commit.

One module per job, each importing only those above it:

- `messages.py`: what a message is (a paragraph, heading or table cell, found by MyST's parser as Sphinx
  finds it) and Markdown translated one message at a time;
- `po.py`: the catalog files (where they lie, reading, writing, the translations they hold);
- `catalogs.py`: `make catalogs`, the English messages extracted and merged into every catalog;
- `checks.py`: what keeps a catalog from being in step with the English and faithful to it, and each
  language's typographic conventions;
- `editions.py`: `make edition`, the editions written from the catalogs;
- `translate.py`: for a translator, what is left in a catalog and writing translations into it;
- `__main__.py`: the command line above.

This file holds the languages, the one place the Makefile, the site, its tests and the tools read them
from. Standard library only (the Makefile reads it before any environment exists); the other modules need
the docs extra (Sphinx, sphinx-intl, MyST's parser, Babel).
"""

# Every language of the course by its own name, English first; the translations are the others.
NAMES = {"en": "English", "zh_CN": "中文", "de": "Deutsch"}
LANGUAGES = [code for code in NAMES if code != "en"]
# How each language separates the items of a list that a template joins (a lesson list: 03、05b 和 06).
SERIES_COMMA = {"en": ", ", "zh_CN": "、", "de": ", "}
