"""The catalogs on disk: locales/<lang>/LC_MESSAGES/<page>.po, one per page and language (GNU gettext's
PO format, read and written with Babel), all with one header and one line width, so that a catalog's
diff shows only its messages."""

from datetime import datetime, timezone
from pathlib import Path

from babel.messages.pofile import read_po, write_po

from tools.translations.messages import ROOT

LOCALES = ROOT / "locales"
WIDTH = 110                     # the catalogs' line width (sphinx-intl's -w), the repository's


def catalog_path(lang, page, locales=LOCALES):
    return Path(locales) / lang / "LC_MESSAGES" / f"{page}.po"


def pages_of(lang, locales=LOCALES):
    """The pages `lang` has a catalog of, named as "notebooks/05a_delta_rule"."""
    here = Path(locales) / lang / "LC_MESSAGES"
    return {p.relative_to(here).with_suffix("").as_posix() for p in here.rglob("*.po")}


def read_catalog(path):
    with Path(path).open("rb") as f:
        return read_po(f)


def write_catalog(path, catalog):
    """Write `catalog` to `path`, without Babel's python-format guesses (a "10 %" in the prose is not a
    format string)."""
    for message in catalog:
        message.flags.discard("python-format")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=WIDTH, no_location=True)


def header(catalog, lang):
    """The same header in every catalog, whatever day it was updated (a diff shows only messages)."""
    catalog.header_comment = (f"# The kimik3-lessons course in {lang}: the messages of one page "
                              "(tools/translations).\n"
                              "# Copyright (C) the kimik3-lessons authors (MIT licence)")
    catalog.creation_date = catalog.revision_date = datetime(2026, 12, 1, tzinfo=timezone.utc)
    catalog.last_translator = catalog.language_team = "the kimik3-lessons authors"
    catalog.fuzzy = False


def translations_of(lang, pages, locales=LOCALES):
    """{msgid: msgstr} of `lang`'s catalogs of `pages`: the translated messages, none fuzzy."""
    out = {}
    for page in pages:
        path = catalog_path(lang, page, locales)
        if path.exists():
            out.update({m.id: m.string for m in read_catalog(path) if m.id and m.string and not m.fuzzy})
    return out
