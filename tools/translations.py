"""The course in other languages (docs/translations.md): catalogs, the in-step check, the editions.

    python tools/translations.py catalogs            # make catalogs: extract and update locales/
    python tools/translations.py check               # every catalog complete and in step (exit 1 if not)
    python tools/translations.py edition zh_CN       # make edition LANG=zh_CN: editions/zh_CN/

The English pages are the one source. `catalogs` writes the site's pages (tools/site_pages.py: the
lessons, the README's parts, the teaching guide, the benchmarks page), extracts their messages with
Sphinx's gettext builder (one template per page, a message per paragraph, heading, table cell or equation)
and merges them into locales/<lang>/LC_MESSAGES/<page>.po with sphinx-intl. A translator fills the
`msgstr`s. The site is built from those catalogs by Sphinx itself (`make site`); an edition's notebooks are
the English ones with every markdown cell translated through the same catalogs (`edition`), their code
cells and outputs untouched.

A message of an English paragraph that changed is a new message: it has no translation until someone
writes one (sphinx-intl keeps the old one beside it, marked fuzzy, as a hint), and `check` fails until
then, so a change to the English prose carries its translations in the same commit.
"""

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import site_pages  # noqa: E402

LANGUAGES = ["zh_CN", "de"]
LOCALES = ROOT / "locales"
WORK = ROOT / "build" / "i18n"
WIDTH = 110                     # the catalogs' line width (sphinx-intl's -w), the repository's


# ---------------------------------------------------------------------------------------------------
# The messages of the English pages


def templates(work=WORK):
    """Write the site's English pages into work/src and extract their messages into work/pot (Sphinx's
    gettext builder): {page: babel Catalog}, page as "notebooks/05a_delta_rule"."""
    from babel.messages.pofile import read_po

    src, pot = work / "src", work / "pot"
    site_pages.write_site_sources(src)
    if pot.exists():
        shutil.rmtree(pot)
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "gettext", "-q", "-W", "--keep-going",
                    "-c", str(ROOT / "site"), "-d", str(work / "doctrees"), str(src), str(pot)], check=True)
    found = {}
    for path in sorted(pot.rglob("*.pot")):
        page = path.relative_to(pot).with_suffix("").as_posix()
        if page.startswith("_static/"):
            path.unlink()                   # MathJax's own files, not a page
            continue
        with path.open("rb") as f:
            found[page] = read_po(f)
    return found


def catalog_path(lang, page, locales=LOCALES):
    return locales / lang / "LC_MESSAGES" / f"{page}.po"


def read_catalog(path):
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        return read_po(f)


def write_catalog(path, catalog):
    from babel.messages.pofile import write_po

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=WIDTH, omit_header=False, no_location=True)


# A message with nothing to translate: an equation (a math block), or no word outside math, code and link
# targets (a badge, a number, `chunk_scan`). `catalogs` gives it its own text as translation.
MATH = re.compile(r"\$\$.*?\$\$|\$[^$]+\$", re.S)
CODE = re.compile(r"`[^`]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")


def equations(work=WORK):
    """The text of every math block of the English pages, as the gettext builder writes its message."""
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser
    from markdown_it.renderer import RendererHTML

    md = create_md_parser(MdParserConfig(enable_extensions=set(site_pages_extensions())), RendererHTML)
    found = set()
    for path in (work / "src").rglob("*"):
        if path.suffix == ".md":
            texts = [path.read_text()]
        elif path.suffix == ".ipynb":
            import json
            texts = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                     if c["cell_type"] == "markdown"]
        else:
            continue
        for text in texts:
            for token in md.parse(text):
                if token.type in ("math_block", "math_block_label", "amsmath"):
                    found.add(token.content.strip())
    return found


def site_pages_extensions():
    """The MyST extensions the site enables (site/conf.py), so that pages parse here as they do there."""
    conf = (ROOT / "site" / "conf.py").read_text()
    return re.search(r"myst_enable_extensions = (\[[^\]]*\])", conf)[1].strip("[]").replace('"', "").replace(
        " ", "").split(",")


def has_words(msgid):
    text = LINK_TARGET.sub("]", CODE.sub("", MATH.sub("", msgid)))
    return re.search(r"[A-Za-z]{2,}", text) is not None


def header(catalog, lang):
    """The same header in every catalog, whatever day it was updated (no churn in the diff)."""
    from datetime import datetime, timezone

    catalog.header_comment = (f"# The kimik3-lessons course in {lang}: messages of one page (tools/translations.py).\n"
                              "# Copyright (C) the kimik3-lessons authors (MIT licence)")
    catalog.creation_date = catalog.revision_date = datetime(2026, 12, 1, tzinfo=timezone.utc)
    catalog.last_translator = catalog.language_team = "the kimik3-lessons authors"
    catalog.fuzzy = False


def update_catalogs(locales=LOCALES, work=WORK):
    """`make catalogs`: extract, then merge into every language's catalogs with sphinx-intl; a message with
    nothing to translate gets its own text; entries of messages no longer in English are dropped (their
    translation survives only as the fuzzy hint sphinx-intl gives a changed message)."""
    found = templates(work)
    subprocess.run([sys.executable, "-m", "sphinx_intl", "update", "-p", str(work / "pot"), "-d", str(locales),
                    "-w", str(WIDTH), "--no-obsolete", *sum((["-l", lang] for lang in LANGUAGES), [])],
                   check=True, stdout=subprocess.DEVNULL)
    maths = equations(work)
    for lang in LANGUAGES:
        for path in sorted((locales / lang / "LC_MESSAGES").rglob("*.po")):
            page = path.relative_to(locales / lang / "LC_MESSAGES").with_suffix("").as_posix()
            if page not in found:
                path.unlink()
                continue
            catalog = read_catalog(path)
            catalog.obsolete.clear()
            header(catalog, lang)
            for message in catalog:
                if message.id and not message.string and (message.id in maths or not has_words(message.id)):
                    message.string = message.id
            write_catalog(path, catalog)
        for mo in (locales / lang).rglob("*.mo"):
            mo.unlink()
    counts = {lang: problems_of(lang, found, locales) for lang in LANGUAGES}
    for lang, found_problems in counts.items():
        print(f"{lang}: {len(found_problems)} messages to translate or review")


# ---------------------------------------------------------------------------------------------------
# In step: complete, not fuzzy, nothing stale


def problems_of(lang, found, locales=LOCALES):
    """What keeps `lang`'s catalogs from being in step with the English pages `found` (templates()): one
    line per message untranslated, fuzzy, missing or stale, and per page without a catalog."""
    out = []
    here = locales / lang / "LC_MESSAGES"
    pages = {p.relative_to(here).with_suffix("").as_posix() for p in here.rglob("*.po")} if here.exists() else set()
    for page in sorted(pages - set(found)):
        out.append(f"{lang}/{page}.po: a catalog of a page the site no longer has")
    for page, template in sorted(found.items()):
        if page not in pages:
            out.append(f"{lang}/{page}.po: missing (make catalogs)")
            continue
        catalog = read_catalog(catalog_path(lang, page, locales))
        wanted = {m.id for m in template if m.id}
        for message in catalog:
            if not message.id:
                continue
            where = f"{lang}/{page}.po: {message.id[:70]!r}"
            if message.id not in wanted:
                out.append(f"{where}: stale, the English page has no such message (make catalogs)")
            elif message.fuzzy:
                out.append(f"{where}: fuzzy (the English changed: translate it again, drop the flag)")
            elif not message.string:
                out.append(f"{where}: untranslated")
            else:
                out.extend(f"{where}: {p}" for p in kept_verbatim(message.id, message.string))
        have = {m.id for m in catalog if m.id}
        out.extend(f"{lang}/{page}.po: {m[:70]!r}: missing (make catalogs)" for m in sorted(wanted - have))
        if catalog.obsolete:
            out.append(f"{lang}/{page}.po: {len(catalog.obsolete)} obsolete entries (make catalogs drops them)")
    return out


def kept_verbatim(msgid, msgstr):
    """A translation keeps every equation, piece of code and link target of its message as it is."""
    out = []
    for name, pattern in (("equation", MATH), ("code", CODE), ("link target", LINK_TARGET)):
        english, translated = sorted(pattern.findall(msgid)), sorted(pattern.findall(msgstr))
        if english != translated:
            lost = sorted(set(english) - set(translated))
            out.append(f"the translation changes or drops {name} {lost[:2] or sorted(set(translated))[:2]}")
    return out


def check(work=WORK, locales=LOCALES):
    found = templates(work)
    return [line for lang in LANGUAGES for line in problems_of(lang, found, locales)]


# ---------------------------------------------------------------------------------------------------
# For a translator: what is left in one catalog, and writing translations into it


def todo(path):
    """The messages of catalog `path` still to translate (untranslated or fuzzy), in page order."""
    messages = [m for m in read_catalog(path) if m.id]
    return [{"n": n, "msgid": m.id, "hint": m.string if m.fuzzy else ""}
            for n, m in enumerate(messages) if m.fuzzy or not m.string]


def apply(path, translations):
    """Write {msgid: msgstr} into catalog `path` (each message then no longer fuzzy); a key "#n" names the
    n-th message, as `todo` numbers them. Returns the problems: a msgid the catalog lacks, a translation
    that does not keep its message's equations, code and links."""
    catalog = read_catalog(path)
    messages = [m for m in catalog if m.id]
    out = []
    for key, msgstr in translations.items():
        number = re.fullmatch(r"#(\d+)", key)
        message = messages[int(number[1])] if number and int(number[1]) < len(messages) else catalog.get(key)
        if message is None or not key:
            out.append(f"not a message of {path}: {key[:70]!r}")
            continue
        msgid = message.id
        found = kept_verbatim(msgid, msgstr)
        if found:
            out.extend(f"{msgid[:70]!r}: {p}" for p in found)
            continue
        message.string = msgstr
        message.flags.discard("fuzzy")
    write_catalog(path, catalog)
    return out


# ---------------------------------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("catalogs", help="extract the English messages and update every catalog")
    sub.add_parser("check", help="exit 1, with a list, unless every catalog is complete and in step")
    p = sub.add_parser("todo", help="print, as JSON, the messages of one catalog still to translate")
    p.add_argument("po", type=Path)
    p = sub.add_parser("apply", help="write the translations of a JSON file {msgid: msgstr} into a catalog")
    p.add_argument("po", type=Path)
    p.add_argument("json", type=Path)
    args = parser.parse_args(argv)
    if args.command in ("todo", "apply"):
        import json
        if args.command == "todo":
            print(json.dumps(todo(args.po), ensure_ascii=False, indent=1))
            return
        found = apply(args.po, json.loads(args.json.read_text()))
        print("\n".join(found) or f"applied; {len(todo(args.po))} messages left in {args.po}")
        sys.exit(1 if found else 0)
    if args.command == "catalogs":
        update_catalogs()
    elif args.command == "check":
        found = check()
        for line in found:
            print(line)
        print(f"{len(found)} problems" if found else "every catalog complete and in step")
        sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
