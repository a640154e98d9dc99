"""`make edition LANG=<lang>`: editions/<lang>/, the course's files with their prose translated through
the catalogs.

An edition has the lessons (`notebooks/*.ipynb`: every markdown cell translated; code cells, outputs, ids
and metadata the English ones, byte for byte), a README (the README whole: its title and introduction,
the site's lesson table, every section, and a note on what stays English) and the teaching guide
(`docs/teaching.md`). Its links open its own files where it has them, the repository's otherwise; its
Colab badges open its notebooks.

The site's pages are the messages' source, and an edition translates the repository's files, whose links
differ from their pages' (site_pages.Links resolves them for the site). So each paragraph, heading and
table cell is found as Sphinx finds it: parsed by MyST's own parser, written as on its page (the same
rewrite), cleaned as the gettext builder cleans a message. Its translation then gets the file's own link
targets back, in order.
"""

import json
import re
import tempfile
from pathlib import Path

from tools import repo_url, site_pages
from tools.translations import LANGUAGES, NAMES, SERIES_COMMA
from tools.translations.messages import MATH, PLACEHOLDER, ROOT, has_words, message_of, translate_markdown
from tools.translations.po import LOCALES, translations_of

EDITIONS = ROOT / "editions"
STUDENT = "student/README"      # the catalog of the student edition's README (tools/student_edition.py)
README = "README"               # the catalog of the README's sections the site does not show, and the note
GUIDE = "docs/teaching.md"      # the teaching guide, a page of the site (its catalog: docs/teaching.po)
SITE_README = ["Lessons", *site_pages.RUNNING_SECTIONS]   # the README's sections on the site's pages
BADGE_ONLY = re.compile(r"\[!\[[^\]]*\]\([^)]*\)\]\(([^)]*)\)")    # a paragraph that is one image link
# The site's lesson table writes its figures as MyST images with a width; on GitHub, HTML does that.
MYST_THUMBNAIL = re.compile(r"\[!\[([^\]]*)\]\(([^)]+)\)\{w=(\d+)px\}\]\(([^)]+)\)")

# What an edition's README says first, below its introduction: what it translates, what stays English
# and why, and where the terms are ({glossary}: the language's glossary).
EDITION_NOTE = """\
**What this edition translates.** The prose of every lesson, this README and the
[teaching guide](docs/teaching.md). Code, printed output, figure labels and the exercises' feedback (the
✅, ❌ and ⬜ lines a check prints) stay in English by design: they are the English course's own code cells
and outputs, byte for byte, so this edition runs, and is checked, exactly as the English course is. The
[glossary]({glossary}) gives each term's translation beside its English, the word a figure or a printed
line shows.
"""


class MissingTranslation(Exception):
    """Markdown with messages that have no translation (the message names each)."""


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


def student_readme(lang, template, phrases, locales=LOCALES):
    """The student edition's README template and phrases (student_edition.README, PHRASES) in `lang`,
    their placeholders kept for the edition to fill, and the language's series comma ("comma")."""
    missing = []
    translate = translator(translations_of(lang, [STUDENT], locales), lambda content: content, missing)

    def piece(content):
        return None if PLACEHOLDER.fullmatch(content.strip()) else translate(content)

    template = translate_markdown(template, piece)
    phrases = {key: translate_markdown(text, piece) for key, text in phrases.items()} | {
        "comma": SERIES_COMMA[lang]}
    if missing:
        raise missing_error(lang, "the student edition's README", missing)
    return template, phrases


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
        if badge and repo_url.BADGE.search(badge[1]):
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


def readme_parts(readme=None):
    """(introduction, {title: text}) of the README (default the repository's), its languages line left
    out."""
    readme = (ROOT / "README.md").read_text() if readme is None else readme
    return site_pages.readme_sections(site_pages.without_languages_line(readme))


def readme_rest(readme=None):
    """The README's sections that no page of the site shows, in order, each with its `## ` heading."""
    _, sections = readme_parts(readme)
    return "".join(f"## {title}\n{text}" for title, text in sections.items() if title not in SITE_README)


def edition_files(lang):
    """The files an edition has, relative to it (and so to the repository, whose layout it repeats)."""
    return {"README.md", GUIDE} | {f"notebooks/{path.name}" for path in site_pages.lessons(ROOT)}


def edition_link(lang, source):
    """relink(target) for a file of `lang`'s edition written from repository file `source`: a relative
    link to a file the edition has stays (the edition repeats the repository's layout), one to any other
    file of the repository climbs out of editions/<lang>/; a Colab badge opens the edition's notebook."""
    own = edition_files(lang)

    def relink(target):
        if re.match(r"^[a-zA-Z][\w+.-]*:", target) or target.startswith(("#", "/")):
            return repo_url.BADGE.sub(
                lambda m: m[0].replace(f"/{m['path']}", f"/editions/{lang}/{m['path']}")
                if m["path"].startswith("notebooks/") else m[0], target)
        if PLACEHOLDER.fullmatch(target):
            return target                           # the edition fills it (EDITION_NOTE's {glossary})
        path = target.partition("#")[0]
        resolved = (ROOT / source).parent.joinpath(path).resolve()
        inside = resolved.is_relative_to(ROOT) and resolved.relative_to(ROOT).as_posix() in own
        return target if inside else "../../" + target
    return relink


def relinked(content, relink):
    """`content` with every link target passed through relink (a piece that is not translated)."""
    for pattern in site_pages.TARGETS:
        content = pattern.sub(lambda m: m[1] + relink(m[2]), content)
    return content


def translate_file(text, lang, source, pages, as_on_page, locales=LOCALES):
    """Markdown `text` of repository file `source` in `lang`, through the catalogs of `pages`, its links
    the edition's (edition_link); raises MissingTranslation naming every message without one."""
    missing, relink = [], edition_link(lang, source)
    translate = translator(translations_of(lang, pages, locales), as_on_page, missing, relink)
    text = translate_markdown(text, lambda content: translate(content) or relinked(content, relink))
    if missing:
        raise missing_error(lang, source, missing)
    return text


def edition_readme(lang, links, locales=LOCALES):
    """An edition's README.md: the README's title and introduction, the edition's note, the site's lesson
    table (each column translated), the README's sections on running the course and all the others,
    translated. Its links open the edition's notebooks and teaching guide, and its badges the notebooks on
    Colab; other files are the repository's."""
    intro, sections = readme_parts()
    table = site_pages.lesson_table(sections["Lessons"], site_pages.lessons(ROOT))
    site = intro + f"## Lessons\n{table}" + "".join(f"## {title}\n{sections[title]}"
                                                      for title in site_pages.RUNNING_SECTIONS)
    site = translate_file(site, lang, "README.md", ["index", "running"],
                          lambda content: links.rewrite(content, "README.md", site_pages.BADGE_FILE), locales)
    intro, lessons = site.split("\n## ", 1)
    note = translate_file(EDITION_NOTE, lang, "README.md", [README], lambda content: content, locales)
    note = note.replace("{glossary}", f"../../docs/glossary.{lang}.md")
    rest = translate_file(readme_rest(), lang, "README.md", [README], lambda content: content, locales)
    text = f"{intro.rstrip()}\n\n{note.rstrip()}\n\n## {lessons.rstrip()}\n\n{rest}"
    text = MYST_THUMBNAIL.sub(r'<a href="\4"><img src="\2" alt="\1" width="\3"></a>', text)
    return languages_line(lang, "../../") + "\n" + text


def edition_guide(lang, links, locales=LOCALES):
    """The teaching guide (docs/teaching.md) in `lang`, through its page's catalog."""
    return translate_file((ROOT / GUIDE).read_text(), lang, GUIDE, [GUIDE.removesuffix(".md")],
                          lambda content: links.rewrite(content, GUIDE, "../" + site_pages.BADGE_FILE),
                          locales)


def write_edition(lang, out=None, badge_dir=None, locales=LOCALES, notebooks=None):
    """`make edition LANG=lang`: editions/<lang>/ (or `out`): the lessons (`notebooks`: their paths,
    default all), README.md and docs/teaching.md; the notebooks' Colab badges open `badge_dir` (default
    the edition's notebooks). Writes every file it can and returns the paths written; raises
    MissingTranslation, naming every message without one, when a file could not be written."""
    if lang not in LANGUAGES:
        raise SystemExit(f"no edition in {lang!r}: the languages are {', '.join(LANGUAGES)}")
    out = Path(out or EDITIONS / lang)
    badge_dir = badge_dir or f"editions/{lang}/notebooks"
    repo, branch = site_pages.repository(ROOT)
    written, problems = [], []
    with tempfile.TemporaryDirectory() as scratch:
        links = site_pages.Links(ROOT, scratch, repo, branch)
        (out / "notebooks").mkdir(parents=True, exist_ok=True)
        for path in site_pages.lessons(ROOT) if notebooks is None else notebooks:
            try:
                nb = edition_notebook(path, lang, links, f"{badge_dir}/{path.name}", locales)
            except MissingTranslation as err:
                problems.append(str(err))
                continue
            target = out / "notebooks" / path.name
            target.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
            written.append(target)
        for rel, write in (("README.md", edition_readme), (GUIDE, edition_guide)):
            try:
                text = write(lang, links, locales)
            except MissingTranslation as err:
                problems.append(str(err))
                continue
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_text(text)
            written.append(out / rel)
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
