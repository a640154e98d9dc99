"""What keeps a language's catalogs from being in step with the English pages and faithful to them, and
each language's typographic conventions (the glossaries state them: docs/glossary.<lang>.md).

`problems_of` is the in-step check (`python -m tools.translations check`, tests/test_translations.py):
every message of the English has a translation, none fuzzy, none stale; a translation keeps its
message's equations, code, link targets and placeholders, renders to the same markup, and follows its
language's conventions (CONVENTIONS).
"""

import functools
import re

from tools import student_edition
from tools.translations.messages import CODE, LINK_TARGET, MATH, PLACEHOLDER, emphasis, markup, prose
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
                if message.string != message.id:       # a message kept as it is (printed output) is not prose
                    out += [f"{where}: {p}" for p in conventions(lang, message.string, message.id)]
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
    "de": [],
}
# Terms each glossary settled against a misreading: (the rendering to write instead, where the old one is
# found in a translation's prose).
TERMS = {
    "zh_CN": [
        ("潜空间专家 / 潜空间 MoE: 潜在专家 reads first as \"potential experts\"",
         r"潜在(?:专家|\s?MoE|混合专家)"),
        ("tile（瓦片）: 分块 is a chunk", r"分块瓦片"),
    ],
    "de": [
        ("abklingen / gedämpft: a state that zerfällt disintegrates",
         r"\b(?:zerfall(?:en|ene[mnrs]?|end\w*|t)|zerfällt|zerfiel\w*)\b"),
        ("Gated-Delta-Regel, as German ML writing and the source article say", r"gesteuerte\w* Delta-Regel"),
        ("Gated MLA, the method's name", r"gegatete\w* MLA"),
        ("Shared Experts: geteilte Experten reads as split experts", r"geteilte\w* Expert"),
    ],
}
# Sentence punctuation and closing brackets: what a bold or italic span never starts with.
LEADING_PUNCTUATION = "。，、；：！？.,;:!?）)」』】"
# A number with commas between groups of three digits: in German prose a decimal (0,001), or the English
# thousands separator copied (1,024), which a German reader reads as a decimal (German writes 1024, 16 384).
GROUPED = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")


# A number with a decimal point (not a version x.y.z, not the middle of one).
DECIMAL_POINT = re.compile(r"(?<![\w.,/])(\d+\.\d+)(?!\d|\.\d)")
# What a decimal point is right in, in German prose too: a version (named just before it), an arXiv number,
# a paper's section, an exercise ("Übung 05a.1": exercise_ids()).
SOFTWARE = ("Python|PyTorch|torch|Triton|triton|numpy|NumPy|CUDA|Sphinx|sphinx-intl|fla-core|transformers|"
            "JupyterLab|nbgrader|nbval|ruff|pytest|Playwright|Debian|Ubuntu|MyST-NB|jieba")
NOT_DECIMAL = re.compile(rf"(?:\b(?:{SOFTWARE})\s*\(?\s*(?:[≥≤<>=]+\s*)?"
                         r"(?:[\d.]+\s*(?:,|und|bis|oder|/|–)\s*)*|\barXiv\s*|\bAbschnitt\s+)$")


@functools.cache
def exercise_ids():
    """The ids of the course's exercises ("05a.1"), read from the exercise kit's source."""
    return frozenset(e[0] for e in student_edition.exercise_list())


def decimal_points(text):
    """The numbers of German prose `text` written with a decimal point (German writes 2,8 Billionen):
    every match of DECIMAL_POINT but a version, an arXiv number, a paper's section and an exercise id (not
    one followed by a unit or a sign: "11.2%" is a share)."""
    def exercise(m):
        return m[1] in exercise_ids() and not re.match(r"\s?[%×]|[A-Za-z]", text[m.end():])
    return [m for m in DECIMAL_POINT.finditer(text)
            if not exercise(m) and not NOT_DECIMAL.search(text[:m.start()])]


SENTENCE_LIMIT, DE_LIMIT = 150, 6      # a Chinese sentence: characters (a formula or code counts as one), 的


def long_sentences(msgstr):
    """The sentences of Chinese `msgstr` (ended by 。！？, or items of a list set apart by ·) that are too
    long to read in one go: more than SENTENCE_LIMIT characters, each formula, piece of code and link
    target counted as one, or DE_LIMIT 的 or more (a chain of attributes a reader must hold before the
    noun)."""
    text = LINK_TARGET.sub("]", CODE.sub("x", MATH.sub("x", msgstr)))
    return [sentence.strip() for sentence in re.split(r"(?<=[。！？])| · ", text)
            if len(sentence.strip()) > SENTENCE_LIMIT or sentence.count("的") >= DE_LIMIT]


def conventions(lang, msgstr, msgid=""):
    """Where translation `msgstr` (of English message `msgid`) breaks its language's conventions
    (CONVENTIONS; in German, a decimal point, and a thousands comma the English has too)."""
    text = prose(msgstr)
    found = [f"{what}: {hit[0]!r}" for what, pattern in CONVENTIONS.get(lang, [])
             if (hit := re.findall(pattern, text))]
    found += [f"write {instead}: {hit[0]!r}" for instead, pattern in TERMS.get(lang, [])
              if (hit := re.findall(pattern, text))]
    found += [f"a {kind} span that starts with punctuation (move it out, after the span before): {span!r}"
              for kind, span in emphasis(msgstr) if span[:1] in LEADING_PUNCTUATION and span]
    if lang == "zh_CN":
        found += [f"a sentence of {len(sentence)} characters or with {sentence.count('的')} 的 (split it, "
                  f"at most {SENTENCE_LIMIT} and fewer than {DE_LIMIT}): {sentence[:40]!r}"
                  for sentence in long_sentences(msgstr)]
    if lang == "de":
        if points := decimal_points(text):
            found.append(f"a decimal point in German prose (write a decimal comma: 2,8): {points[0][1]!r}")
        english = set(GROUPED.findall(prose(msgid)))
        if copied := [n for n in GROUPED.findall(text) if n in english]:
            found.append("the English thousands comma (a German reader reads 1,024 as a decimal: write 1024, "
                         f"16\u202f384): {copied[0]!r}")
    return found
