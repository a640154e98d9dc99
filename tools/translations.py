"""The course in other languages (docs/translations.md): catalogs, the in-step check, the editions.

    python tools/translations.py catalogs          # make catalogs: extract the English, update locales/
    python tools/translations.py check             # every catalog complete and in step (exit 1 if not)
    python tools/translations.py edition zh_CN     # make edition LANG=zh_CN: editions/zh_CN/
    python tools/translations.py todo FILE.po      # what is left to translate in one catalog (JSON)
    python tools/translations.py apply FILE.po B.json   # write translations {"#n" or msgid: msgstr}

The English pages are the one source. `catalogs` writes the site's pages (tools/site_pages.py: the
lessons, the README's parts, the teaching guide, the benchmarks page), extracts their messages with
Sphinx's gettext builder (one template per page; a message per paragraph, heading, table cell, equation
or image text) and merges them into locales/<lang>/LC_MESSAGES/<page>.po with sphinx-intl. The site is
built from those catalogs by Sphinx itself (`make site`); an edition's notebooks are the English ones with
every markdown cell translated through the same catalogs, their code cells and outputs untouched.

An English paragraph that changes is a new message: it has no translation until someone writes one
(sphinx-intl keeps the old one beside it, marked fuzzy, as a hint), and `check` fails until then, so a
change to the English prose carries its translations in the same commit. Needs the docs extra (Sphinx,
sphinx-intl, MyST's parser, Babel).
"""

import argparse
import collections
import functools
import json
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po
from markdown_it.renderer import RendererHTML
from myst_parser.config.main import MdParserConfig
from myst_parser.parsers.mdit import create_md_parser

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import site_pages  # noqa: E402

LANGUAGES = ["zh_CN", "de"]
NAMES = {"en": "English", "zh_CN": "中文", "de": "Deutsch"}
LOCALES = ROOT / "locales"
EDITIONS = ROOT / "editions"
WORK = ROOT / "build" / "i18n"
WIDTH = 110                     # the catalogs' line width (sphinx-intl's -w), the repository's

MATH = re.compile(r"\$\$.*?\$\$|\$[^$]+\$", re.S)
CODE = re.compile(r"`[^`]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")


# ---------------------------------------------------------------------------------------------------
# Catalogs


def templates(work=WORK):
    """Write the site's English pages into work/src and extract their messages into work/pot (Sphinx's
    gettext builder): {page: babel Catalog}, a page named as "notebooks/05a_delta_rule"."""
    src, pot = work / "src", work / "pot"
    site_pages.write_site_sources(src)
    if pot.exists():
        shutil.rmtree(pot)
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "gettext", "-q", "-W", "--keep-going", "-c",
                    str(ROOT / "site"), "-d", str(work / "doctrees"), str(src), str(pot)], check=True)
    student = pot / f"{STUDENT}.pot"                # the student edition's README, not a page of the site
    student.parent.mkdir(parents=True, exist_ok=True)
    catalog = Catalog(project="kimik3-lessons")
    for msgid in student_messages():
        catalog.add(msgid)
    write_catalog(student, catalog)
    found = {}
    for path in sorted(pot.rglob("*.pot")):
        page = path.relative_to(pot).with_suffix("").as_posix()
        if not page.startswith("_static/"):         # MathJax's own files, not pages
            found[page] = read_catalog(path)
    return found


STUDENT = "student/README"
PLACEHOLDER = re.compile(r"\{[a-z_]+\}")


def student_messages():
    """The messages of the student edition's README (tools/student_edition.py: its template, and the
    sentences that depend on the edition's settings), in order; a placeholder alone is not one."""
    import student_edition

    texts = [student_edition.README, *student_edition.PHRASES.values()]
    found = [message_of(block[3]) for text in texts for block in text_blocks(text)]
    return list(dict.fromkeys(m for m in found if has_words(PLACEHOLDER.sub("", m))))


def student_readme(lang, template, phrases, locales=LOCALES):
    """The student edition's README template and phrases (student_edition.README, PHRASES) in `lang`,
    their placeholders kept for the edition to fill."""
    missing = []
    translate = translator(translations_of(lang, [STUDENT], locales), lambda content: content, missing)

    def piece(content):
        return None if PLACEHOLDER.fullmatch(content.strip()) else translate(content)

    template = translate_markdown(template, piece)
    phrases = {key: translate_markdown(text, piece) for key, text in phrases.items()}
    if missing:
        raise missing_error(lang, "the student edition's README", missing)
    return template, phrases


def catalog_path(lang, page, locales=LOCALES):
    return locales / lang / "LC_MESSAGES" / f"{page}.po"


def read_catalog(path):
    with Path(path).open("rb") as f:
        return read_po(f)


def write_catalog(path, catalog):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=WIDTH, no_location=True)


def header(catalog, lang):
    """The same header in every catalog, whatever day it was updated (a diff shows only messages)."""
    catalog.header_comment = (f"# The kimik3-lessons course in {lang}: the messages of one page "
                              "(tools/translations.py).\n"
                              "# Copyright (C) the kimik3-lessons authors (MIT licence)")
    catalog.creation_date = catalog.revision_date = datetime(2026, 12, 1, tzinfo=timezone.utc)
    catalog.last_translator = catalog.language_team = "the kimik3-lessons authors"
    catalog.fuzzy = False


def has_words(msgid):
    """Whether a message has anything to translate: a word outside its math, code and link targets."""
    return re.search(r"[A-Za-z]{2,}", LINK_TARGET.sub("]", CODE.sub("", MATH.sub("", msgid)))) is not None


def equations(src):
    """The text of every math block of the pages in `src`, as the gettext builder writes its message."""
    texts = [path.read_text() for path in src.rglob("*.md")]
    texts += ["".join(cell["source"]) for path in src.rglob("*.ipynb")
              for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "markdown"]
    return {token.content.strip() for text in texts for token in parser().parse(text)
            if token.type in ("math_block", "math_block_label", "amsmath")}


def update_catalogs(locales=LOCALES, work=WORK):
    """`make catalogs`: extract, then merge into every language's catalogs with sphinx-intl. A message with
    nothing to translate (an equation, a badge, a number) gets its own text; entries of messages the
    English no longer has are dropped (a changed message keeps its old translation only as sphinx-intl's
    fuzzy hint); Babel's python-format guesses (a "10 %" in the prose) are dropped."""
    found = templates(work)
    languages = [arg for lang in LANGUAGES for arg in ("-l", lang)]
    subprocess.run([sys.executable, "-m", "sphinx_intl", "update", "-p", str(work / "pot"),
                    "-d", str(locales), "-w", str(WIDTH), "--no-obsolete", *languages],
                   check=True, stdout=subprocess.DEVNULL)
    maths = equations(work / "src")
    for lang in LANGUAGES:
        for path in sorted((locales / lang / "LC_MESSAGES").rglob("*.po")):
            if path.relative_to(locales / lang / "LC_MESSAGES").with_suffix("").as_posix() not in found:
                path.unlink()                       # a page the site no longer has
                continue
            catalog = read_catalog(path)
            catalog.obsolete.clear()
            header(catalog, lang)
            for message in catalog:
                message.flags.discard("python-format")
                if message.id and not message.string and (message.id in maths or not has_words(message.id)):
                    message.string = message.id
            write_catalog(path, catalog)
    for lang in LANGUAGES:
        print(f"{lang}: {len(problems_of(lang, found, locales))} messages to translate or review")


# ---------------------------------------------------------------------------------------------------
# In step: complete, not fuzzy, nothing stale, faithful


def problems_of(lang, found, locales=LOCALES, only=None):
    """What keeps `lang`'s catalogs from being in step with the English pages `found` (templates()): one
    line per message untranslated, fuzzy, missing, stale or unfaithful, and per page without a catalog.
    `only`: the pages to look at (default all)."""
    here = locales / lang / "LC_MESSAGES"
    pages = {p.relative_to(here).with_suffix("").as_posix() for p in here.rglob("*.po")}
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


@functools.cache
def markup(text):
    """How many of each inline element (bold, italic, link, image, code, math) `text` renders to. A
    translation must render to as many as its message: a `**` that CommonMark does not take as bold
    (before a Chinese character, after full-width punctuation) shows as two stars."""
    tokens = [t for block in parser().parse(text) if block.children for t in block.children]
    inline = ("image", "code_inline", "math_inline")
    return collections.Counter(t.type for t in tokens if t.type.endswith("_open") or t.type in inline)


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
    prose = LINK_TARGET.sub("]", CODE.sub(" ", MATH.sub(" ", msgstr)))
    return [f"{what}: {found[0]!r}" for what, pattern in CONVENTIONS.get(lang, [])
            if (found := re.findall(pattern, prose))]


def check(work=WORK, locales=LOCALES):
    """`tools/translations.py check`: the problems of every language's catalogs (empty: in step)."""
    found = templates(work)
    return [line for lang in LANGUAGES for line in problems_of(lang, found, locales)]


# ---------------------------------------------------------------------------------------------------
# Markdown translated through a catalog
#
# The site's pages are the messages' source; an edition translates the repository's files, whose links
# differ from their pages' (site_pages.Links resolves them for the site). So each paragraph, heading and
# table cell is found as Sphinx finds it: parsed by MyST's own parser, written as on its page (the same
# rewrite), cleaned as the gettext builder cleans a message. Its translation then gets the file's own
# link targets back, in order.


class MissingTranslation(Exception):
    """Markdown with messages that have no translation (the message names each)."""


def parser():
    """MyST's markdown-it parser with the site's extensions (site/conf.py), made once."""
    if not hasattr(parser, "md"):
        conf = (ROOT / "site" / "conf.py").read_text()
        extensions = re.findall(r'"(\w+)"', re.search(r"myst_enable_extensions = \[([^\]]*)\]", conf)[1])
        parser.md = create_md_parser(MdParserConfig(enable_extensions=set(extensions)), RendererHTML)
    return parser.md


def text_blocks(text):
    """The translatable pieces of markdown `text`, in order: (first line, end line, table cell index or
    None, content) of every paragraph, heading and table cell; content as MyST hands it to docutils."""
    tokens = parser().parse(text)
    row, cell, out = None, 0, []
    for i, token in enumerate(tokens):
        if token.type == "tr_open":
            row, cell = token.map, 0
        elif token.type == "inline":
            opener = tokens[i - 1]
            if opener.type in ("paragraph_open", "heading_open"):
                out.append((opener.map[0], opener.map[1], None, token.content))
            elif opener.type in ("th_open", "td_open"):
                out.append((row[0], row[0] + 1, cell, token.content))
                cell += 1
    return out


def message_of(content):
    """A paragraph's message as the gettext builder writes it: soft line breaks become spaces."""
    return re.sub(r"[ \t]*\\[ \t]*\n", "\n", content).replace("\n", " ").strip()


def translate_markdown(text, translate):
    """`text` with every paragraph, heading and table cell replaced by translate(content), one line each;
    None leaves the piece as it is. Everything else (code, equations, HTML, the layout) stays."""
    lines, dropped = text.split("\n"), set()
    for first, end, cell, content in text_blocks(text):
        new = translate(content)
        if new is None or new == content:
            continue
        new = " ".join(new.split("\n"))
        if cell is None:                            # after the line's list marker, quote or heading mark
            head = content.split("\n")[0]
            at = lines[first].find(head)
            if at < 0:
                raise ValueError(f"cannot place the translation of {head!r} in {lines[first]!r}")
            lines[first] = lines[first][:at] + new
            dropped.update(range(first + 1, end))
        else:                                       # one cell of a table row, split at unescaped pipes
            parts = re.split(r"(?<!\\)\|", lines[first])
            parts[cell + (parts[0].strip() == "")] = f" {new} "
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


def translator(messages, as_on_page, missing, relink=lambda target: target):
    """translate(content) for translate_markdown: the message of `content` as its page writes it
    (as_on_page), looked up in `messages`; the translation's link targets made the file's own again, then
    passed through relink. A piece with words and no translation is added to `missing`."""
    def translate(content):
        shown = as_on_page(content)
        msgid = message_of(shown)
        if msgid not in messages:
            if has_words(msgid):
                missing.append(msgid)
            return None
        text = messages[msgid]
        for pattern in site_pages.TARGETS:
            for on_page, own in zip(pattern.finditer(shown), pattern.finditer(content), strict=False):
                if on_page[2] != own[2] or relink(own[2]) != own[2]:
                    text = text.replace(on_page[1] + on_page[2], own[1] + relink(own[2]))
        return text
    return translate


def missing_error(lang, rel, missing):
    return MissingTranslation(f"{lang}: {rel}: no translation of " + "; ".join(repr(m[:60]) for m in missing))


# ---------------------------------------------------------------------------------------------------
# The editions

BADGE_ONLY = re.compile(r"\[!\[[^\]]*\]\([^)]*\)\]\(([^)]*)\)")    # a paragraph that is one image link
RUNNING = ["Quick start", "CPU, GPU, Colab"]     # the README's sections on running the course, in an edition
# The site's lesson table writes its figures as MyST images with a width; on GitHub, HTML does that.
MYST_THUMBNAIL = re.compile(r"\[!\[([^\]]*)\]\(([^)]+)\)\{w=(\d+)px\}\]\(([^)]+)\)")


def edition_notebook(path, lang, links, badge_path, locales=LOCALES):
    """Lesson notebook `path` in `lang` (a dict): its markdown cells translated, its Colab badge opening
    `badge_path`; its code cells, outputs, ids and metadata untouched."""
    rel = f"notebooks/{path.name}"
    nb = json.loads(path.read_text())
    missing = []
    translate = translator(translations_of(lang, [f"notebooks/{path.stem}"], locales),
                           lambda content: site_pages.lesson_markdown(content, rel, links), missing)

    def piece(content):
        badge = BADGE_ONLY.fullmatch(content.strip())
        if badge and site_pages.repo_url.BADGE.search(badge[1]):
            return content.replace(f"/{rel})", f"/{badge_path})")
        return translate(content)

    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = translate_markdown("".join(cell["source"]), piece).splitlines(keepends=True)
    if missing:
        raise missing_error(lang, rel, missing)
    return nb


def languages_line(lang, to_root):
    """🌐 English · 中文 · Deutsch, each a link to that language's README (`to_root`: from here to the
    repository's root). The README has the same line; the site leaves it out (it has a switch)."""
    links = [f"**{name}**" if code == lang else
             f"[{name}]({to_root}{'README.md' if code == 'en' else f'editions/{code}/README.md'})"
             for code, name in NAMES.items()]
    return "🌐 " + " · ".join(links) + "\n"


def edition_readme(lang, links, locales=LOCALES):
    """An edition's README.md: the README's title and introduction, the site's lesson table (each column
    translated) and the README's sections on running the course, translated. Its links open the edition's
    notebooks and its badges open them on Colab; other files are the repository's."""
    intro, sections = site_pages.readme_sections(site_pages.without_languages_line(
        (ROOT / "README.md").read_text()))
    table = site_pages.lesson_table(sections["Lessons"], site_pages.lessons(ROOT))
    text = intro + f"## Lessons\n{table}" + "".join(f"## {title}\n{sections[title]}" for title in RUNNING)

    def relink(target):
        if re.match(r"^[a-zA-Z][\w+.-]*:", target) or target.startswith(("#", "/")):
            return site_pages.repo_url.BADGE.sub(
                lambda m: m[0].replace(f"/{m['path']}", f"/editions/{lang}/{m['path']}")
                if m["path"].startswith("notebooks/") else m[0], target)
        return target if target.startswith("notebooks/") else "../../" + target

    def relinked(content):
        for pattern in site_pages.TARGETS:
            content = pattern.sub(lambda m: m[1] + relink(m[2]), content)
        return content

    missing = []
    translate = translator(translations_of(lang, ["index", "running"], locales),
                           lambda content: links.rewrite(content, "README.md", site_pages.BADGE_FILE),
                           missing, relink)
    text = translate_markdown(text, lambda content: translate(content) or relinked(content))
    if missing:
        raise missing_error(lang, "README.md", missing)
    text = MYST_THUMBNAIL.sub(r'<a href="\4"><img src="\2" alt="\1" width="\3"></a>', text)
    return languages_line(lang, "../../") + "\n" + text


def write_edition(lang, out=None, badge_dir=None, locales=LOCALES):
    """`make edition LANG=lang`: editions/<lang>/notebooks/*.ipynb and editions/<lang>/README.md (or into
    `out`); the notebooks' Colab badges open `badge_dir` (default the edition's notebooks). Returns the
    paths written; raises MissingTranslation, naming every message without one."""
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
    """What an edition notebook changed beyond its prose (both dicts): cells added, dropped, reordered or
    retyped; a code cell (source, outputs, metadata) not byte for byte the English one; a markdown cell
    whose equations differ. Empty: the edition is the English notebook with its prose translated."""
    if [(c["cell_type"], c.get("id")) for c in english["cells"]] != \
            [(c["cell_type"], c.get("id")) for c in edition["cells"]]:
        return ["the cells differ in number, order, type or id"]
    out = [] if english.get("metadata") == edition.get("metadata") else ["the notebook's metadata differs"]
    for i, (en, ed) in enumerate(zip(english["cells"], edition["cells"], strict=True)):
        if en["cell_type"] == "code" and json.dumps(en, sort_keys=True) != json.dumps(ed, sort_keys=True):
            out.append(f"cell {i + 1}: the code cell is not the English one")
        elif en["cell_type"] == "markdown":
            # a line break inside $...$ is a space: the translation writes the paragraph on one line
            eq_en, eq_ed = (sorted(" ".join(m.split()) for m in MATH.findall("".join(c["source"])))
                            for c in (en, ed))
            if eq_en != eq_ed:
                out.append(f"cell {i + 1}: its equations differ from the English ones")
    return out


# ---------------------------------------------------------------------------------------------------
# For a translator: what is left in a catalog, and writing translations into it


def todo(path):
    """The messages of catalog `path` still to translate (untranslated or fuzzy), numbered in page order,
    with the old translation of a fuzzy one as a hint."""
    messages = [m for m in read_catalog(path) if m.id]
    return [{"n": n, "msgid": m.id, "hint": m.string if m.fuzzy else ""}
            for n, m in enumerate(messages) if m.fuzzy or not m.string]


def apply(path, translations):
    """Write {msgid or "#n": msgstr} into catalog `path` ("#n": the n-th message, as `todo` numbers them);
    each message written is no longer fuzzy. Returns the problems: a key that names no message, a
    translation that does not keep its message's equations, code, links and markup (not written)."""
    catalog = read_catalog(path)
    messages = [m for m in catalog if m.id]
    out = []
    for key, msgstr in translations.items():
        number = re.fullmatch(r"#(\d+)", key)
        if number:
            message = messages[int(number[1])] if int(number[1]) < len(messages) else None
        else:
            message = catalog.get(key) if key else None
        if message is None:
            out.append(f"not a message of {path}: {key[:70]!r}")
        elif found := kept_verbatim(message.id, msgstr):
            out += [f"{message.id[:70]!r}: {p}" for p in found]
        else:
            message.string = msgstr
            message.flags.discard("fuzzy")
    write_catalog(Path(path), catalog)
    return out


def main(argv=None):
    parser_ = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser_.add_subparsers(dest="command", required=True)
    sub.add_parser("catalogs", help="extract the English messages and update every catalog")
    sub.add_parser("check", help="exit 1, with a list, unless every catalog is complete and in step")
    sub.add_parser("edition", help="write editions/LANG/: the lessons and README translated").add_argument(
        "lang", choices=LANGUAGES)
    sub.add_parser("todo", help="print, as JSON, what is left to translate in a catalog").add_argument(
        "po", type=Path)
    p = sub.add_parser("apply", help="write a JSON file's translations {msgid or #n: msgstr} into a catalog")
    p.add_argument("po", type=Path)
    p.add_argument("json", type=Path)
    args = parser_.parse_args(argv)
    if args.command == "catalogs":
        update_catalogs()
    elif args.command == "check":
        found = check()
        print("\n".join(found + [f"{len(found)} problems" if found else "every catalog in step"]))
        sys.exit(1 if found else 0)
    elif args.command == "edition":
        try:
            written = write_edition(args.lang)
        except MissingTranslation as err:
            sys.exit(f"{err}\n(make catalogs, then translate: tools/translations.py todo FILE.po)")
        print(f"{args.lang} edition: {len(written)} files in editions/{args.lang}/")
    elif args.command == "todo":
        print(json.dumps(todo(args.po), ensure_ascii=False, indent=1))
    else:
        found = apply(args.po, json.loads(args.json.read_text()))
        print("\n".join(found) or f"applied; {len(todo(args.po))} messages left in {args.po}")
        sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
