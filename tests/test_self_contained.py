"""The repository stands on its own: no tracked file points at design notes or folders outside it.

The conventions and facts the code relies on live in `docs/` (design.md, facts.md). A mention of a
planning file that is not in the repository, or of a path above the checkout, sends a reader nowhere.
"""

import re
from pathlib import Path

from test_docstring_names import repository_files

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = re.compile("|".join([r"\b" + "DESIGN" + r"\.md\b", r"\b" + "REFERENCE" + r"\.md\b",
                               r"\.\./" + "shared" + r"\b"]))


def mentions(paths):
    found = []
    for path in paths:
        try:
            text = path.read_text()
        except UnicodeDecodeError:   # a figure, a binary
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    return found


def test_no_file_names_a_file_outside_the_repository():
    found = mentions(repository_files())
    assert not found, "these lines name files that are not in the repository:\n" + "\n".join(found)


def test_the_pattern_catches_each_outside_name():
    assert OUTSIDE.search("see " + "DESIGN" + ".md for the contract")
    assert OUTSIDE.search("(" + "REFERENCE" + ".md)")
    assert OUTSIDE.search("../" + "shared/notes")
    assert not OUTSIDE.search("see docs/design.md and docs/facts.md")
