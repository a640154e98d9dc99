"""What keeps a language's catalogs from being in step with the English pages and faithful to them, and
each language's typographic conventions (the glossaries state them: docs/glossary.<lang>.md).

`problems_of` is the in-step check (`python -m tools.translations check`, tests/test_translations.py):
every message of the English has a translation, none fuzzy, none stale; a translation keeps its
message's equations, code, link targets and placeholders, renders to the same markup, and follows its
language's conventions (CONVENTIONS).
"""

import re

from tools.translations.messages import CODE, LINK_TARGET, MATH, PLACEHOLDER, markup, prose
from tools.translations.po import LOCALES, catalog_path, pages_of, read_catalog


def problems_of(lang, found, locales=LOCALES, only=None):
    """What keeps `lang`'s catalogs from being in step with the English pages `found` (catalogs.templates):
    one line per message untranslated, fuzzy, missing, stale or unfaithful, and per page without a
    catalog. `only`: the pages to look at (default all)."""
    pages = pages_of(lang, locales)
    out = [f"{lang}/{page}.po: a catalog of a page the site no longer has"
           for page in sorted(pages - set(found)) if only is None or page in only]
    for page, template in sorted(found.items()):
        if only is not None and page not in only:
            continue
        if page not in pages:
            out.append(f"{lang}/{page}.po: missing (make catalogs)")
            continue
        catalog = read_catalog(catalog_path(lang, page, locales))
        wanted = {m.id for m in template if m.id}
        for message in (m for m in catalog if m.id):
            where = f"{lang}/{page}.po: {message.id[:70]!r}"
            if message.id not in wanted:
                out.append(f"{where}: stale, the English page has no such message (make catalogs)")
            elif message.fuzzy:
                out.append(f"{where}: fuzzy (the English changed: translate it again, drop the flag)")
            elif not message.string:
                out.append(f"{where}: untranslated")
            else:
                out += [f"{where}: {p}" for p in kept_verbatim(message.id, message.string)]
                out += [f"{where}: {p}" for p in conventions(lang, message.string)]
        have = {m.id for m in catalog if m.id}
        out += [f"{lang}/{page}.po: {m[:70]!r}: missing (make catalogs)" for m in sorted(wanted - have)]
        if catalog.obsolete:
            out.append(f"{lang}/{page}.po: {len(catalog.obsolete)} obsolete entries "
                       "(make catalogs drops them)")
    return out


def kept_verbatim(msgid, msgstr):
    """A translation keeps every equation, piece of code and link target of its message as it is, and
    renders to the same markup."""
    out = []
    english, translated = markup(msgid), markup(msgstr)
    if english != translated:
        changed = sorted(k for k in english.keys() | translated.keys() if english[k] != translated[k])
        out.append("the translation does not render to the same markup: " + ", ".join(
            f"{k.removesuffix('_open')} {english[k]} in English, {translated[k]} here" for k in changed))
    if BLOCK_MARK.match(msgstr) and msgstr != msgid:
        out.append("the translation starts like a Markdown list item, quote or heading, and Sphinx parses "
                   "a translation by itself, so a heading '1. Title' would stay English: escape it (1\\.)")
    for name, pattern in (("equation", MATH), ("code", CODE), ("link target", LINK_TARGET),
                          ("placeholder", PLACEHOLDER)):
        english, translated = sorted(pattern.findall(msgid)), sorted(pattern.findall(msgstr))
        if english != translated:
            lost = sorted(set(english) - set(translated)) or sorted(set(translated) - set(english))
            out.append(f"the translation changes or drops {name} {lost[:2]}")
    return out


BLOCK_MARK = re.compile(r"(\d+[.)]|[-*+>]|#{1,6})(\s|$)")     # what starts a list item, quote, heading
HAN = "[\u4e00-\u9fff]"
# The typographic conventions each glossary states: (what is wrong, where it is found in a translation's
# prose, its math, code and link targets taken out).
CONVENTIONS = {
    "zh_CN": [
        ("ASCII punctuation in a Chinese sentence (write ，。：；？！)",
         HAN + r"[,.;:?!](?!\d)|[,;:?!]\s*" + HAN),
        ("ASCII parentheses around Chinese text (write （）)", r"\([^()]*" + HAN + r"[^()]*\)"),
        ("no space between Chinese and a Latin word or number", HAN + r"[A-Za-z0-9]|[A-Za-z0-9]" + HAN),
    ],
    "de": [("a thousands comma (a German reader reads 1,024 as a decimal: write 1024, 16\u202f384)",
            r"(?<![\d.])\d{1,3}(?:,\d{3})+(?!\d)")],
}


def conventions(lang, msgstr):
    """Where translation `msgstr` breaks its language's conventions (CONVENTIONS)."""
    text = prose(msgstr)
    return [f"{what}: {found[0]!r}" for what, pattern in CONVENTIONS.get(lang, [])
            if (found := re.findall(pattern, text))]
