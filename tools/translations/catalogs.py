"""`make catalogs`: the English pages' messages extracted and merged into every language's catalogs.

The pages are the site's (tools/site_pages.py writes them; Sphinx's gettext builder extracts one template
per page) and two texts that are not pages of the site, each written as one more template beside them:
the README's sections the site does not show, with the note an edition's README opens with
(`README.pot`), and the student edition's README (`student/README.pot`). sphinx-intl then merges every
template into locales/<lang>/LC_MESSAGES/<page>.po.
"""

import json
import shutil
import subprocess
import sys

from babel.messages.catalog import Catalog

from tools import site_pages
from tools.translations import LANGUAGES, editions
from tools.translations.checks import problems_of
from tools.translations.editions import README, STUDENT
from tools.translations.messages import ROOT, has_words, message_of, messages_of, parser, text_blocks
from tools.translations.po import LOCALES, WIDTH, header, read_catalog, write_catalog

WORK = ROOT / "build" / "i18n"


def templates(work=WORK):
    """Write the site's English pages into work/src and extract their messages into work/pot (Sphinx's
    gettext builder), with the two texts that are not pages: {page: babel Catalog}, a page named as
    "notebooks/05a_delta_rule"."""
    src, pot = work / "src", work / "pot"
    site_pages.write_site_sources(src)
    if pot.exists():
        shutil.rmtree(pot)
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "gettext", "-q", "-W", "--keep-going", "-c",
                    str(ROOT / "site"), "-d", str(work / "doctrees"), str(src), str(pot)],
                   check=True, cwd=ROOT)     # site/conf.py imports tools: the root on sys.path (-m)
    for page, messages in ((STUDENT, student_messages()), (README, readme_messages())):
        catalog = Catalog(project="kimik3-lessons")
        for msgid in messages:
            catalog.add(msgid)
        write_catalog(pot / f"{page}.pot", catalog)
    found = {}
    for path in sorted(pot.rglob("*.pot")):
        page = path.relative_to(pot).with_suffix("").as_posix()
        if not page.startswith("_static/"):         # MathJax's own files, not pages
            found[page] = read_catalog(path)
    return found


def student_messages():
    """The messages of the student edition's README (tools/student_edition.py: its template, and the
    sentences that depend on the edition's settings), in order; a placeholder alone is not one."""
    from tools import student_edition

    return list(dict.fromkeys(m for text in [student_edition.README, *student_edition.PHRASES.values()]
                              for m in messages_of(text)))


def readme_messages():
    """The messages of an edition's README that no page of the site has: its opening note and the
    README's sections on testing, the site, the translations, teaching and the layout."""
    return list(dict.fromkeys(messages_of(editions.EDITION_NOTE) + messages_of(editions.readme_rest())))


def equations(src):
    """The text of every math block of the pages in `src`, as the gettext builder writes its message."""
    texts = [path.read_text() for path in src.rglob("*.md")]
    texts += ["".join(cell["source"]) for path in src.rglob("*.ipynb")
              for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "markdown"]
    return {token.content.strip() for text in texts for token in parser().parse(text)
            if token.type in ("math_block", "math_block_label", "amsmath")}


def printed(src):
    """The messages of what the lessons' code cells printed as Markdown (a table of compile results):
    printed output, which stays as it is in every language, and changes whenever a lesson runs again."""
    texts = ["".join(out["data"]["text/markdown"]) for path in src.rglob("*.ipynb")
             for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"
             for out in cell.get("outputs", []) if "text/markdown" in out.get("data", {})]
    return {message_of(block[3]) for text in texts for block in text_blocks(text)}


def update_catalogs(locales=LOCALES, work=WORK, quiet=False):
    """`make catalogs`: extract, then merge into every language's catalogs with sphinx-intl. A message with
    nothing to translate (an equation, a badge, a number) or printed by a lesson (printed()) gets its own
    text; entries of messages the English no longer has are dropped (a changed message keeps its old
    translation only as sphinx-intl's fuzzy hint). Returns the templates (templates())."""
    found = templates(work)
    languages = [arg for lang in LANGUAGES for arg in ("-l", lang)]
    subprocess.run([sys.executable, "-m", "sphinx_intl", "update", "-p", str(work / "pot"),
                    "-d", str(locales), "-w", str(WIDTH), "--no-obsolete", *languages],
                   check=True, stdout=subprocess.DEVNULL)
    as_they_are = equations(work / "src") | printed(work / "src")
    for lang in LANGUAGES:
        for path in sorted((locales / lang / "LC_MESSAGES").rglob("*.po")):
            if path.relative_to(locales / lang / "LC_MESSAGES").with_suffix("").as_posix() not in found:
                path.unlink()                       # a page the site no longer has
                continue
            catalog = read_catalog(path)
            catalog.obsolete.clear()
            header(catalog, lang)
            for message in catalog:
                if message.id and (message.id in as_they_are or not has_words(message.id)) and (
                        not message.string or message.fuzzy):
                    message.string = message.id
                    message.flags.discard("fuzzy")
            write_catalog(path, catalog)
    if not quiet:
        for lang in LANGUAGES:
            print(f"{lang}: {len(problems_of(lang, found, locales))} messages to translate or review")
    return found
