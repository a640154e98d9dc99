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
                message.flags.discard("python-format")     # Babel's guess, from a "10 %" in the prose
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


def markup(text):
    """How many of each inline element (bold, italic, link, image, code, math) `text` renders to: a
    translation must render to as many as its message (a `**` that CommonMark does not take as bold,
    next to full-width punctuation, shows as two stars)."""
    import collections

    tokens = [t for block in _parser().parse(text) if block.children for t in block.children]
    return collections.Counter(t.type for t in tokens if t.type.endswith("_open") or t.type in (
        "image", "code_inline", "math_inline"))


def kept_verbatim(msgid, msgstr):
    """A translation keeps every equation, piece of code and link target of its message as it is, and
    renders to the same markup."""
    out = []
    english, translated = markup(msgid), markup(msgstr)
    if english != translated:
        changed = sorted(k for k in english.keys() | translated.keys() if english[k] != translated[k])
        out.append("the translation does not render to the same markup: " + ", ".join(
            f"{k.removesuffix('_open')} {english[k]} in English, {translated[k]} here" for k in changed))
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
# Markdown translated through a catalog: the editions
#
# The site's pages are the messages' source; an edition translates the repository's files, whose links
# differ from their pages' (site_pages.Links resolves them for the site). So each paragraph, heading and
# table cell is found the way Sphinx finds it: parsed by MyST's own parser, written as on its page (the
# same rewrite), cleaned as the gettext builder cleans a message; its translation then gets the
# repository's link targets back, in order.


class MissingTranslation(Exception):
    """Markdown with a message that has no translation (names every one of them)."""


def _parser():
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    if not hasattr(_parser, "md"):
        _parser.md = create_md_parser(MdParserConfig(enable_extensions=set(site_pages_extensions())),
                                      RendererHTML)
    return _parser.md


def text_blocks(text):
    """The translatable pieces of markdown `text`, in order: (first line, end line, table cell index or
    None, content) of every paragraph, heading and table cell; content as MyST hands it to docutils."""
    tokens = _parser().parse(text)
    row, cell, out = None, 0, []
    for i, token in enumerate(tokens):
        if token.type == "tr_open":
            row, cell = token.map, 0
        elif token.type == "inline":
            parent = tokens[i - 1]
            if parent.type in ("paragraph_open", "heading_open"):
                out.append((parent.map[0], parent.map[1], None, token.content))
            elif parent.type in ("th_open", "td_open"):
                out.append((row[0], row[0] + 1, cell, token.content))
                cell += 1
    return out


def message_of(content):
    """A paragraph's message as the gettext builder writes it: soft line breaks become spaces."""
    return re.sub(r"[ \t]*\\[ \t]*\n", "\n", content).replace("\n", " ").strip()


def _row_cells(line):
    """A table row split at its unescaped pipes: [before the first pipe, cell 0, cell 1, ..., after]."""
    return re.split(r"(?<!\\)\|", line)


def translate_markdown(text, translate):
    """`text` with every paragraph, heading and table cell replaced by translate(content), one line each;
    a None leaves the piece as it is. Everything else (code, equations, HTML, layout) stays."""
    lines = text.split("\n")
    dropped = set()
    for first, end, cell, content in text_blocks(text):
        new = translate(content)
        if new is None or new == content:
            continue
        new = " ".join(new.split("\n"))
        if cell is None:
            head = content.split("\n")[0]
            at = lines[first].find(head)
            if at < 0:
                raise ValueError(f"cannot place the translation of {head!r} in {lines[first]!r}")
            lines[first] = lines[first][:at] + new
            dropped.update(range(first + 1, end))
        else:
            parts = _row_cells(lines[first])
            part = cell + (1 if parts[0].strip() == "" else 0)
            parts[part] = f" {new} "
            lines[first] = "|".join(parts)
    return "\n".join(line for i, line in enumerate(lines) if i not in dropped)


def translations_of(lang, pages, locales=LOCALES):
    """{msgid: msgstr} of `lang`'s catalogs of `pages`: the translated messages, none fuzzy."""
    out = {}
    for page in pages:
        path = catalog_path(lang, page, locales)
        if path.exists():
            out.update({m.id: m.string for m in read_catalog(path) if m.id and m.string and not m.fuzzy})
    return out


def translator(messages, as_on_page, missing, relink=lambda target: target, strict=True):
    """translate(content) for translate_markdown: the message of `content` as its page writes it
    (as_on_page), looked up in `messages`; the translation's link targets back to the file's own, then
    through relink. A piece with words but no translation is added to `missing` (strict) or kept."""
    def translate(content):
        shown = as_on_page(content)
        msgid = message_of(shown)
        if msgid not in messages:
            if strict and has_words(msgid):
                missing.append(msgid)
            return None
        text = messages[msgid]
        for pattern in site_pages.TARGETS:
            for on_page, own in zip(pattern.finditer(shown), pattern.finditer(content), strict=False):
                if on_page[2] != own[2] or relink(own[2]) != own[2]:
                    text = text.replace(on_page[1] + on_page[2], own[1] + relink(own[2]))
        return text
    return translate


EDITIONS = ROOT / "editions"
BADGE_ONLY = re.compile(r"\[!\[[^\]]*\]\([^)]*\)\]\(([^)]*)\)")    # a paragraph that is one image link


def edition_notebook(path, lang, links, badge_path, locales=LOCALES):
    """Lesson notebook `path` (a dict) in `lang`: its markdown cells translated (the Colab badge opening
    `badge_path`), its code cells, outputs, ids and metadata untouched."""
    import json

    rel = f"notebooks/{path.name}"
    nb = json.loads(path.read_text())
    messages = translations_of(lang, [f"notebooks/{path.stem}"], locales)
    missing = []
    translate = translator(messages, lambda c: site_pages.lesson_markdown(c, rel, links), missing)

    def own_badge(content):
        """The lesson's Colab badge opens the edition's notebook; every other piece is translated."""
        badge = BADGE_ONLY.fullmatch(content.strip())
        if badge and site_pages.repo_url.BADGE.search(badge[1]):
            return content.replace(f"/{rel})", f"/{badge_path})")
        return translate(content)

    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            text = translate_markdown("".join(cell["source"]), own_badge)
            cell["source"] = text.splitlines(keepends=True)
    if missing:
        raise MissingTranslation(f"{lang}: {rel}: no translation of " + "; ".join(repr(m[:60]) for m in missing))
    return nb


RUNNING = ["Quick start", "CPU, GPU, Colab"]     # the README's sections on running the course, in an edition
NAMES = {"en": "English", "zh_CN": "中文", "de": "Deutsch"}
# The site's lesson table writes its figures as MyST images with a width; on GitHub, HTML does that.
MYST_THUMBNAIL = re.compile(r"\[!\[([^\]]*)\]\(([^)]+)\)\{w=(\d+)px\}\]\(([^)]+)\)")


def languages_line(lang, to_root):
    """🌐 English · 中文 · Deutsch, each a link to that language's README (`to_root`: from here to the
    repository's root); the README writes the same line, which the site leaves out (it has a switch)."""
    links = [f"**{NAMES[code]}**" if code == lang else
             f"[{NAMES[code]}]({to_root}{'README.md' if code == 'en' else f'editions/{code}/README.md'})"
             for code in NAMES]
    return "🌐 " + " · ".join(links) + "\n"


def edition_readme(lang, links, locales=LOCALES):
    """The edition's README.md: the README's title and introduction, the site's lesson table (every
    column translated), and the README's sections on running the course, translated; its links open the
    edition's notebooks, its badges open them on Colab."""
    intro, sections = site_pages.readme_sections(site_pages.without_languages_line(
        (ROOT / "README.md").read_text()))
    table = site_pages.lesson_table(sections["Lessons"], site_pages.lessons(ROOT))
    text = (intro + f"## Lessons\n{table}" + "".join(f"## {title}\n{sections[title]}" for title in RUNNING))
    messages = translations_of(lang, ["index", "running"], locales)
    missing = []

    def relink(target):
        if re.match(r"^[a-zA-Z][\w+.-]*:", target) or target.startswith(("#", "/")):
            return site_pages.repo_url.BADGE.sub(
                lambda m: m[0].replace(f"/{m['path']}", f"/editions/{lang}/{m['path']}")
                if m["path"].startswith("notebooks/") else m[0], target)
        return target if target.startswith("notebooks/") else "../../" + target

    translate = translator(messages, lambda c: links.rewrite(c, "README.md", site_pages.BADGE_FILE), missing,
                           relink)
    text = translate_markdown(text, lambda content: translate(content) or relinked(content, relink))
    if missing:
        raise MissingTranslation(f"{lang}: README.md: no translation of " + "; ".join(m[:60] for m in missing))
    text = MYST_THUMBNAIL.sub(r'<a href="\4"><img src="\2" alt="\1" width="\3"></a>', text)
    return languages_line(lang, "../../") + "\n" + text


def relinked(text, relink):
    for pattern in site_pages.TARGETS:
        text = pattern.sub(lambda m: m[1] + relink(m[2]), text)
    return text


def write_edition(lang, out=None, badge_dir=None, locales=LOCALES):
    """`make edition LANG=lang`: editions/<lang>/notebooks/*.ipynb and editions/<lang>/README.md. Returns
    the paths written. badge_dir: the folder the notebooks' Colab badges open (the edition's own)."""
    import json
    import tempfile

    if lang not in LANGUAGES:
        raise SystemExit(f"no edition in {lang!r}: the languages are {', '.join(LANGUAGES)}")
    out = Path(out or EDITIONS / lang)
    badge_dir = badge_dir or f"editions/{lang}/notebooks"
    repo, branch = site_pages.repository(ROOT)
    written, problems = [], []
    with tempfile.TemporaryDirectory() as scratch:
        links = site_pages.Links(ROOT, scratch, repo, branch)
        (out / "notebooks").mkdir(parents=True, exist_ok=True)
        for path in site_pages.lessons(ROOT):
            try:
                nb = edition_notebook(path, lang, links, f"{badge_dir}/{path.name}", locales)
            except MissingTranslation as err:
                problems.append(str(err))
                continue
            target = out / "notebooks" / path.name
            target.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
            written.append(target)
        try:
            (out / "README.md").write_text(edition_readme(lang, links, locales))
            written.append(out / "README.md")
        except MissingTranslation as err:
            problems.append(str(err))
    if problems:
        raise MissingTranslation("\n".join(problems))
    return written


def edition_differences(english, edition):
    """What an edition notebook changed beyond its prose (both dicts): cells added, dropped, reordered
    or retyped, a code cell (source, outputs, metadata) not byte-for-byte the English one, a markdown cell
    whose equations differ. Empty: the edition is the English notebook with its prose translated."""
    import json

    out = []
    if [(c["cell_type"], c.get("id")) for c in english["cells"]] != \
            [(c["cell_type"], c.get("id")) for c in edition["cells"]]:
        return ["the cells differ in number, order, type or id"]
    if english.get("metadata") != edition.get("metadata"):
        out.append("the notebook's metadata differs")
    for i, (en, ed) in enumerate(zip(english["cells"], edition["cells"], strict=True)):
        if en["cell_type"] == "code":
            if json.dumps(en, sort_keys=True) != json.dumps(ed, sort_keys=True):
                out.append(f"cell {i + 1}: the code cell is not the English one")
        elif en["cell_type"] == "markdown":
            eq_en, eq_ed = (sorted(MATH.findall("".join(c["source"]))) for c in (en, ed))
            if eq_en != eq_ed:
                out.append(f"cell {i + 1}: its equations differ from the English ones")
    return out


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
    p = sub.add_parser("edition", help="write editions/LANG/: the notebooks and README translated")
    p.add_argument("lang", choices=LANGUAGES)
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
    if args.command == "edition":
        try:
            written = write_edition(args.lang)
        except MissingTranslation as err:
            sys.exit(f"{err}\n(translate these in locales/{args.lang}/: tools/translations.py todo FILE.po)")
        print(f"{args.lang} edition: {len(written)} files in {EDITIONS.relative_to(ROOT)}/{args.lang}/")
    elif args.command == "catalogs":
        update_catalogs()
    elif args.command == "check":
        found = check()
        for line in found:
            print(line)
        print(f"{len(found)} problems" if found else "every catalog complete and in step")
        sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
