"""For a translator: what is left in a catalog (`todo`), and writing translations into it (`apply`).
Any PO editor (Poedit, Lokalize, Emacs po-mode) does the same."""

import re
from pathlib import Path

from tools.translations.checks import kept_verbatim
from tools.translations.po import read_catalog, write_catalog


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
