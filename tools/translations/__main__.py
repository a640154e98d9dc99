"""The command line of tools.translations (its docstring lists the commands); the Makefile's `catalogs`,
`edition` and `lesson` targets call it."""

import argparse
import json
import sys
from pathlib import Path

from tools.translations import LANGUAGES
from tools.translations import __doc__ as DOC
from tools.translations.catalogs import WORK, templates, update_catalogs
from tools.translations.checks import problems_of
from tools.translations.editions import MissingTranslation, write_edition
from tools.translations.messages import ROOT
from tools.translations.po import LOCALES, catalog_path
from tools.translations.translate import apply, todo

TODO = "python -m tools.translations todo"


def check(work=WORK, locales=LOCALES):
    """`check`: the problems of every language's catalogs (empty: in step)."""
    found = templates(work)
    return [line for lang in LANGUAGES for line in problems_of(lang, found, locales)]


def lesson(notebooks, locales=LOCALES):
    """`make lesson NOTEBOOKS=...`, after the lessons ran again: the catalogs updated, both editions written
    again (every file that can be), and the messages now out of date listed, by catalog. Returns how many
    there are."""
    found = update_catalogs(locales, quiet=True)
    left = 0
    for lang in LANGUAGES:
        try:
            written = write_edition(lang, locales=locales)
            print(f"{lang} edition: {len(written)} files written again")
        except MissingTranslation as err:
            print(f"{lang} edition: the files below were not written (a message without a translation)")
            print(err)
        for page in sorted(found):
            entries = todo(catalog_path(lang, page, locales))
            if entries:
                left += len(entries)
                mine = any(Path(nb).stem == page.removeprefix("notebooks/") for nb in notebooks)
                path = catalog_path(lang, page, locales)
                shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                print(f"\n{lang}/{page}.po: {len(entries)} to translate{' (this lesson)' if mine else ''}"
                      f" ({TODO} {shown})")
                for entry in entries:
                    hint = " (fuzzy: its old translation is a hint)" if entry["hint"] else ""
                    print(f"  #{entry['n']}{hint}: {entry['msgid'][:100]}")
    print(f"\n{left} catalog messages out of date" if left else "\nevery catalog in step")
    return left


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.translations", description=DOC.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("catalogs", help="extract the English messages and update every catalog")
    sub.add_parser("check", help="exit 1, with a list, unless every catalog is complete and in step")
    sub.add_parser("edition", help="write editions/LANG/: the lessons, README and guide translated"
                   ).add_argument("lang", choices=LANGUAGES)
    sub.add_parser("lesson", help="after a lesson ran again: catalogs, both editions, what is out of date"
                   ).add_argument("notebooks", nargs="+")
    sub.add_parser("todo", help="print, as JSON, what is left to translate in a catalog").add_argument(
        "po", type=Path)
    p = sub.add_parser("apply", help="write a JSON file's translations {msgid or #n: msgstr} into a catalog")
    p.add_argument("po", type=Path)
    p.add_argument("json", type=Path)
    args = parser.parse_args(argv)
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
            sys.exit(f"{err}\n(make catalogs, then translate: {TODO} FILE.po)")
        print(f"{args.lang} edition: {len(written)} files in editions/{args.lang}/")
    elif args.command == "lesson":
        sys.exit(1 if lesson(args.notebooks) else 0)
    elif args.command == "todo":
        print(json.dumps(todo(args.po), ensure_ascii=False, indent=1))
    else:
        found = apply(args.po, json.loads(args.json.read_text()))
        print("\n".join(found) or f"applied; {len(todo(args.po))} messages left in {args.po}")
        sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
