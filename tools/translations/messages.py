"""What a message is, and Markdown translated one message at a time.

A message is what Sphinx's gettext builder extracts from a page: one paragraph, heading, list item or
table cell, written in Markdown (soft line breaks made spaces); one equation; one image's alternative
text. The Markdown of a notebook cell or a file is split into the same pieces by MyST's own parser,
configured as the site configures it (site/conf.py), so that a piece of a file is found in the catalogs
as Sphinx wrote it.
"""

import collections
import functools
import re
from pathlib import Path

from markdown_it.renderer import RendererHTML
from myst_parser.config.main import MdParserConfig
from myst_parser.parsers.mdit import create_md_parser

ROOT = Path(__file__).resolve().parents[2]

MATH = re.compile(r"\$\$.*?\$\$|\$[^$]+\$", re.S)
CODE = re.compile(r"`[^`]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
PLACEHOLDER = re.compile(r"\{[a-z_]+\}")        # a template's {name}, which the edition fills


@functools.cache
def parser():
    """MyST's markdown-it parser with the site's extensions (site/conf.py), made once."""
    conf = (ROOT / "site" / "conf.py").read_text()
    extensions = re.findall(r'"(\w+)"', re.search(r"myst_enable_extensions = \[([^\]]*)\]", conf)[1])
    return create_md_parser(MdParserConfig(enable_extensions=set(extensions)), RendererHTML)


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


def messages_of(text):
    """The messages of markdown `text` with words in them, in order, each once."""
    found = [message_of(block[3]) for block in text_blocks(text)]
    return list(dict.fromkeys(m for m in found if has_words(PLACEHOLDER.sub("", m))))


def prose(msgid):
    """A message without its math, code and link targets: the words a translator translates."""
    return LINK_TARGET.sub("]", CODE.sub(" ", MATH.sub(" ", msgid)))


def has_words(msgid):
    """Whether a message has anything to translate: a word outside its math, code and link targets."""
    return re.search(r"[A-Za-z]{2,}", LINK_TARGET.sub("]", CODE.sub("", MATH.sub("", msgid)))) is not None


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


def inline_tokens(text):
    """The inline tokens markdown `text` renders to (bold, italic, links, code, math, its words)."""
    return [t for block in parser().parse(text) if block.children for t in block.children]


@functools.cache
def markup(text):
    """How many of each inline element (bold, italic, link, image, code, math) `text` renders to. A
    translation must render to as many as its message: a `**` that CommonMark does not take as bold
    (before a Chinese character, after full-width punctuation) shows as two stars."""
    inline = ("image", "code_inline", "math_inline")
    return collections.Counter(t.type for t in inline_tokens(text)
                               if t.type.endswith("_open") or t.type in inline)


def emphasis(text):
    """[(kind, rendered text)] of every bold ("strong") and italic ("em") span markdown `text` renders to,
    in order of their ends: what the reader sees emphasized, wherever the stars were put."""
    out, open_spans = [], []
    for token in inline_tokens(text):
        if token.type in ("strong_open", "em_open"):
            open_spans.append([token.type.removesuffix("_open"), ""])
        elif token.type in ("strong_close", "em_close"):
            kind, shown = open_spans.pop()
            out.append((kind, shown))
            if open_spans:
                open_spans[-1][1] += shown
        elif open_spans:
            open_spans[-1][1] += token.content
    return out
