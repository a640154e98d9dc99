"""The GitHub repository the course points to: its Colab badges, its Colab install lines, its README,
its website.

    python -m tools.repo_url                    # print it and check every place agrees (exit 1 if not)
    python -m tools.repo_url --set owner/name   # rewrite it everywhere (`make set-repo REPO=owner/name`)

A fork or a course copy lives at another `owner/name`; the notebooks' Colab badges
(`colab.research.google.com/github/<owner>/<name>/blob/main/notebooks/NN_slug.ipynb`), their first
cell's `%pip install "kimik3-lessons[ref] @ git+https://github.com/<owner>/<name>"`, the committed
results a notebook fetches from `raw.githubusercontent.com/<owner>/<name>/...`, the README's lesson
table and any other `github.com/<owner>/<name>` link must then all change together, and so must the
website's address the README gives, `https://<owner>.github.io/<name>/` (GitHub Pages, which writes the
owner in lower case; .github/workflows/site.yml publishes it). The rewrite is a text
substitution on the files (the notebooks' JSON included): nothing else in them changes, outputs and
cell ids stay as they are. Standard library only (no torch), so it runs before any environment exists.
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPO = r"(?P<repo>[A-Za-z0-9](?:[A-Za-z0-9-]*)/[A-Za-z0-9._-]+?)"
# Where the repository appears, with the text before it kept as group 1.
BADGE = re.compile(r"(colab\.research\.google\.com/github/)" + REPO + r"/blob/(?P<branch>[^/\s]+)/"
                   r"(?P<path>[^)\s\"'\\]+)")
INSTALL = re.compile(r"(kimik3-lessons(?:\[[\w,\s-]*\])?\s*@\s*git\+https://github\.com/)" + REPO
                     + r"(?:\.git)?(?=[\"'@#\s\\]|$)")
RAW = re.compile(r"(raw\.githubusercontent\.com/)" + REPO + r"(?=/)")
# The website's address, in the README (the one file that gives it).
SITE = re.compile(r"https://(?P<owner>[A-Za-z0-9-]+)\.github\.io/(?P<name>[A-Za-z0-9._-]+)/")
# What the docs write for "your repository" (`make student REPO=owner/name`): an example, never the course's.
PLACEHOLDER = "owner/name"
VALID = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]+$")


def course_files(root=ROOT):
    """The files that name the repository: the notebooks, the README, any docs, the translated editions."""
    root = Path(root)
    files = sorted((root / "notebooks").glob("*.ipynb")) + [root / "README.md"]
    editions = sorted((root / "editions").glob("*/notebooks/*.ipynb"))
    editions += sorted((root / "editions").glob("*/README.md"))
    return files + sorted((root / "docs").glob("**/*.md")) + editions


def site_url(repo):
    """Where GitHub Pages publishes the website of `owner/name`: https://<owner>.github.io/<name>/, the
    owner in lower case."""
    owner, name = repo.split("/")
    return f"https://{owner.lower()}.github.io/{name}/"


def find(text):
    """[(kind, repo, detail)] for every badge ("badge", repo, notebook path), install line and raw-file
    URL (a committed result a notebook fetches when the package runs without the repository); an example
    that names PLACEHOLDER is none of them."""
    found = [("badge", m["repo"], m["path"]) for m in BADGE.finditer(text)]
    found += [("raw", m["repo"], "") for m in RAW.finditer(text)]
    found += [("install", m["repo"], "") for m in INSTALL.finditer(text)]
    return [f for f in found if f[1] != PLACEHOLDER]


def _first_cells(path, n=3):
    import json

    cells = json.loads(Path(path).read_text())["cells"][:n]
    return "\n".join("".join(c["source"]) for c in cells)


def problems(root=ROOT):
    """What disagrees: more than one repository named, a notebook without its badge or install line in
    its first cells, a badge that opens another notebook, a notebook missing from the README's table."""
    root = Path(root)
    out, repos = [], {}
    for path in course_files(root):
        if not path.exists():
            continue
        for kind, repo, _ in find(path.read_text()):
            repos.setdefault(repo, set()).add(f"{path.relative_to(root)} ({kind})")
    notebooks = sorted((root / "notebooks").glob("*.ipynb"))
    readme = (root / "README.md").read_text() if (root / "README.md").exists() else ""
    readme_badges = {detail for kind, _, detail in find(readme) if kind == "badge"}
    editions = sorted((root / "editions").glob("*/notebooks/*.ipynb"))
    for nb in notebooks + editions:
        own = nb.relative_to(root).as_posix()
        head = find(_first_cells(nb))
        badges = [detail for kind, _, detail in head if kind == "badge"]
        if not badges:
            out.append(f"{own}: no Colab badge in its first cells")
        elif any(b != own for b in badges):
            out.append(f"{own}: its Colab badge opens {badges[0]}, not {own}")
        if not any(kind == "install" for kind, _, _ in head):
            out.append(f"{own}: no `kimik3-lessons @ git+https://github.com/...` install line "
                       "in its first cells")
        if nb.parent == root / "notebooks" and own not in readme_badges:
            out.append(f"README.md: the lesson table has no Colab badge for {own}")
    if len(repos) > 1:
        where = "; ".join(f"{repo} in {', '.join(sorted(files))}" for repo, files in sorted(repos.items()))
        out.append(f"the files name {len(repos)} repositories: {where}")
    if not repos:
        out.append("no Colab badge or install line found")
    if len(repos) == 1:
        (repo,) = repos
        for m in SITE.finditer(readme):
            if m[0] != site_url(repo):
                out.append(f"README.md: the website's address {m[0]} is not {site_url(repo)}, "
                           f"the one of {repo}")
    return out, sorted(repos)


def rewrite(text, new, old_repos, readme=False):
    """`text` with every badge, install line and raw-file URL, and every other github.com link to one of
    `old_repos`, pointing at `new`; in the README (`readme`), the website's address too."""
    if readme:
        text = SITE.sub(site_url(new), text)
    def keep_examples(replace):
        return lambda m: m[0] if m["repo"] == PLACEHOLDER else replace(m)

    text = BADGE.sub(keep_examples(lambda m: f"{m[1]}{new}/blob/{m['branch']}/{m['path']}"), text)
    text = INSTALL.sub(keep_examples(lambda m: f"{m[1]}{new}"), text)
    text = RAW.sub(keep_examples(lambda m: f"{m[1]}{new}"), text)
    for old in old_repos:
        if old != new:
            text = re.sub(r"(?<![\w.-])(github\.com/)" + re.escape(old) + r"(?![\w.-])",
                          lambda m: m[1] + new, text)
    return text


def normalize(repo):
    """`owner/name` from `owner/name`, `https://github.com/owner/name` or `...name.git`."""
    repo = re.sub(r"^(?:https?://)?github\.com/", "", repo.strip()).rstrip("/")
    repo = repo.removesuffix(".git")
    if not VALID.match(repo):
        raise ValueError(f"expected a GitHub repository as owner/name, got {repo!r}")
    return repo


def set_repo(new, root=ROOT):
    """Point every course file under `root` at github.com/`new`; return the files changed."""
    new = normalize(new)
    _, old_repos = problems(root)
    changed = []
    for path in course_files(root):
        if not path.exists():
            continue
        text = path.read_text()
        updated = rewrite(text, new, old_repos, readme=path == Path(root) / "README.md")
        if updated != text:
            path.write_text(updated)
            changed.append(path)
    return changed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", metavar="OWNER/NAME", help="rewrite the repository everywhere")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    args = parser.parse_args(argv)
    if args.set:
        try:
            changed = set_repo(args.set, args.root)
        except ValueError as err:
            parser.error(str(err))
        for path in changed:
            print(f"rewrote {path.relative_to(args.root)}")
        print(f"{len(changed)} file(s) now point at https://github.com/{normalize(args.set)} "
              f"(website {site_url(normalize(args.set))})")
    found, repos = problems(args.root)
    for repo in repos:
        print(f"https://github.com/{repo}")
    for problem in found:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
