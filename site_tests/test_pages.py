"""tools/site_pages.py, which writes the site's pages: the widgets' default pictures and their lines, the
Colab badge served by the site, links resolved as in the repository. No browser, no Sphinx: seconds."""

import ast
import copy
import json
import re

import pytest

from conftest import ROOT, lessons, repo_url
from tools import site_pages


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("site-src")
    site_pages.write_site_sources(out)
    return out


def _literal_controls(source):
    """(description, value) of every widget built in `source` with a literal value and description, read
    from the code (not from the widget state the pages are made from)."""
    found = []
    for node in ast.walk(ast.parse("\n".join(l for l in source.splitlines() if not l.startswith("%")))):
        if isinstance(node, ast.Call):
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(kw.get("value"), ast.Constant) and isinstance(kw.get("description"), ast.Constant):
                found.append((kw["description"].value, kw["value"].value))
    return found


def test_every_widget_becomes_its_default_picture_and_a_line_with_its_defaults(pages):
    widgets = 0
    for nb_path in lessons():
        original = json.loads(nb_path.read_text())
        page = json.loads((pages / "notebooks" / nb_path.name).read_text())
        assert "widgets" not in page["metadata"]
        sources = ["".join(c["source"]) for c in page["cells"]]
        for cell in original["cells"]:
            if not any(site_pages.WIDGET_MIME in o.get("data", {}) for o in cell.get("outputs", [])):
                continue
            widgets += 1
            code = "\n".join(l for l in "".join(cell["source"]).split("\n") if not l.startswith("# NBVAL_"))
            i = sources.index(code)
            shown, line = page["cells"][i]["outputs"], sources[i + 1]
            assert shown and all("image/png" in o["data"] for o in shown), nb_path.name
            assert not any(site_pages.WIDGET_MIME in o["data"] for o in shown)
            assert "widget-default" in line and "defaults" in line and "running.md" in line, line
            for description, value in _literal_controls(code):
                shown = re.search(rf"`{re.escape(description)}` = (.+?)(?:, `|\)\.\*)", line)
                assert shown, (nb_path.name, description, line)
                where = (nb_path.name, description, line)
                if isinstance(value, (int, float)):   # as the readout writes it: 3.00, 1,413, 5.6
                    assert float(shown[1].replace(",", "")) == pytest.approx(value, rel=1e-2), where
                else:
                    assert shown[1] == str(value), where
    assert widgets > 0


def test_a_widget_whose_picture_is_not_stored_stops_the_build():
    path = next(nb for nb in lessons() if "widgets" in json.loads(nb.read_text())["metadata"])
    nb = json.loads(path.read_text())
    state = site_pages.widget_state(nb)
    for model in state.values():
        if model["model_name"] == "OutputModel":
            model["state"]["outputs"] = []
    with pytest.raises(SystemExit, match="default picture is not stored"):
        site_pages.static_widgets(copy.deepcopy(nb), path.name)


def test_the_sentence_that_says_what_moving_shows():
    cells = [{"cell_type": "markdown", "source": "## 3. A title\n\nThe figure shows $x$. Move the slider\n"
                                               "to see $x$ grow. Then more.\n"},
             {"cell_type": "code", "source": "def f(): ..."}, {"cell_type": "code", "source": "interact(f)"}]
    assert site_pages.what_moving_shows(cells, 2) == "Move the slider to see $x$ grow."
    cells[0]["source"] = "## Move the decay\n\nNo sentence here tells the reader what to do.\n"
    assert site_pages.what_moving_shows(cells, 2) is None


def test_links_resolve_as_in_the_repository(tmp_path):
    (repo,), branch = repo_url.problems(ROOT)[1], "main"
    links = site_pages.Links(ROOT, tmp_path, repo, branch)
    source = "notebooks/01_gpt2_kv_cache.ipynb"
    assert links.target("02_linear_attention.ipynb", source) == "02_linear_attention.ipynb"   # a page
    assert links.target("../docs/teaching.md#course-plan", source) == "../docs/teaching.md#course-plan"
    assert links.target("../kimik3_lessons/gpt2.py", source) == \
        f"https://github.com/{repo}/blob/main/kimik3_lessons/gpt2.py"
    assert links.target("../benchmarks/results", source) == f"https://github.com/{repo}/tree/main/benchmarks/results"
    assert links.target("../figures/01_kv_cache_bytes.png", source) == "../figures/01_kv_cache_bytes.png"
    assert (tmp_path / "figures" / "01_kv_cache_bytes.png").exists()       # copied beside the pages
    assert links.target("no_such_lesson.ipynb", source) == "no_such_lesson.ipynb"   # left for -W to fail
    assert links.target("https://example.org/a.png", source) == "https://example.org/a.png"


def test_the_pages_load_the_colab_badge_from_the_site_and_link_each_notebook(pages):
    written = [p for p in pages.rglob("*") if p.suffix in (".md", ".ipynb")]
    assert {p.relative_to(pages).as_posix() for p in written} >= {
        "index.md", "running.md", "docs/teaching.md", "benchmarks/README.md",
        *(f"notebooks/{nb.name}" for nb in lessons())}
    for path in written:
        assert site_pages.COLAB_BADGE not in path.read_text(), path
    for nb in lessons():
        first = "".join(json.loads((pages / "notebooks" / nb.name).read_text())["cells"][0]["source"])
        assert f"(../{site_pages.BADGE_FILE})" in first and f"/blob/main/notebooks/{nb.name})" in first, first


def test_the_readme_gives_the_website_of_the_repository():
    (repo,) = repo_url.problems(ROOT)[1]
    assert repo_url.site_url(repo) in (ROOT / "README.md").read_text()
