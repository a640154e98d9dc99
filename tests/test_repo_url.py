"""The notebooks (Colab badges, install lines) and the README name one repository, and
`make set-repo REPO=owner/name` (tools/repo_url.py) rewrites it everywhere and nothing else."""

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "repo_url.py"
_spec = importlib.util.spec_from_file_location("repo_url", SCRIPT)
repo_url = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(repo_url)


def test_notebooks_and_readme_name_one_repository():
    problems, repos = repo_url.problems(ROOT)
    assert not problems, "\n".join(problems)
    assert len(repos) == 1


def test_every_notebook_opens_with_its_badge_and_install_line():
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        head = repo_url.find(repo_url._first_cells(nb))
        assert ("badge", repo_url.problems(ROOT)[1][0], f"notebooks/{nb.name}") in head, nb.name
        assert any(kind == "install" for kind, _, _ in head), nb.name


def _copy(tmp_path):
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    return tmp_path


def _with_site_url(root):
    """The README's website address (added when this README has none, e.g. the student edition's)."""
    readme = root / "README.md"
    (repo,) = repo_url.problems(root)[1]
    if not repo_url.SITE.search(readme.read_text()):
        readme.write_text(readme.read_text() + f"\nThe course as a website: {repo_url.site_url(repo)}\n")
    return repo


def test_set_repo_rewrites_badges_install_lines_and_readme_only(tmp_path):
    root = _copy(tmp_path)
    old = _with_site_url(root)
    before = {p: p.read_text() for p in repo_url.course_files(root)}
    changed = repo_url.set_repo("https://github.com/A-Fork/my.course.git", root)
    assert set(changed) == set(before)
    problems, repos = repo_url.problems(root)
    assert not problems and repos == ["A-Fork/my.course"]
    for path, text in before.items():
        after = path.read_text()
        assert old not in after
        if path.suffix == ".ipynb":
            json.loads(after)  # still a notebook
        # nothing but the repository and the website's address changed (other links, e.g. fla-org's, included)
        restored = after.replace("https://a-fork.github.io/my.course/", repo_url.site_url(old))
        assert restored.replace("A-Fork/my.course", old) == text, path.name
    readme = (root / "README.md").read_text()
    assert "github.com/fla-org/flash-linear-attention" in readme
    # GitHub Pages writes the owner in lower case
    assert "https://a-fork.github.io/my.course/" in readme and repo_url.site_url(old) not in readme


def test_a_website_address_that_disagrees_is_reported_and_set_repo_fixes_it(tmp_path):
    root = _copy(tmp_path)
    old = _with_site_url(root)
    readme = root / "README.md"
    text = readme.read_text()
    readme.write_text(text.replace(repo_url.site_url(old), "https://someone.github.io/else/"))
    problems, repos = repo_url.problems(root)
    assert repos == [old] and any("someone.github.io/else" in p for p in problems), problems
    repo_url.set_repo(old, root)
    assert repo_url.problems(root) == ([], [old]) and readme.read_text() == text


def test_an_example_that_names_owner_slash_name_is_neither_counted_nor_rewritten(tmp_path):
    root = _copy(tmp_path)
    (old,) = repo_url.problems(root)[1]
    (root / "docs").mkdir()
    example = 'Your class\'s copy: `pip install "kimik3-lessons[ref] @ git+https://github.com/owner/name"`.\n'
    (root / "docs" / "guide.md").write_text(example)
    assert repo_url.problems(root) == ([], [old])
    repo_url.set_repo("a-fork/my.course", root)
    assert (root / "docs" / "guide.md").read_text() == example


def test_the_website_address_of_a_repository():
    assert repo_url.site_url("Some-Owner/My.Course") == "https://some-owner.github.io/My.Course/"


def test_a_notebook_that_disagrees_with_the_readme_is_reported(tmp_path):
    root = _copy(tmp_path)
    nb = sorted((root / "notebooks").glob("*.ipynb"))[0]
    text = nb.read_text()
    (old,) = repo_url.problems(root)[1]
    nb.write_text(text.replace(f"git+https://github.com/{old}", "git+https://github.com/someone/else"))
    problems, repos = repo_url.problems(root)
    assert len(repos) == 2 and any("2 repositories" in p and nb.name in p for p in problems), problems
    repo_url.set_repo(old, root)  # and set-repo brings them back together
    assert repo_url.problems(root) == ([], [old])
    assert nb.read_text() == text


@pytest.mark.parametrize("bad", ["owner", "owner/name/extra", "-owner/name", "owner/na me"])
def test_set_repo_refuses_what_is_not_owner_slash_name(bad):
    with pytest.raises(ValueError, match="owner/name"):
        repo_url.normalize(bad)


def test_the_script_runs_without_torch():
    code = (f"import runpy, sys; sys.argv = [{str(SCRIPT)!r}]\n"
            f"try:\n    runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'torch' not in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("https://github.com/")


@pytest.mark.parametrize("where, installs", [
    ({"modules": {"google.colab"}, "environ": {}}, True),                               # Colab
    ({"modules": set(), "environ": {"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}}, True),   # Kaggle
    ({"modules": set(), "environ": {}}, False)])                                       # a course checkout
def test_the_first_cell_installs_the_course_on_colab_and_kaggle_only(where, installs):
    """The site's buttons open each lesson on Colab and on Kaggle: there the first cell must install the
    course (else the next import fails), and nowhere else (a checkout has it installed, editable)."""
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cell = next(c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        condition = next(line for line in "".join(cell["source"]).splitlines() if line.startswith("if "))
        test = condition.removeprefix("if ").split(":  #")[0].rstrip(":")
        namespace = {"sys": type("sys", (), {"modules": where["modules"]}),
                     "os": type("os", (), {"environ": where["environ"]})}
        assert eval(test, namespace) is installs, (nb.name, test)
