"""tools/site_pages.py, which writes the site's pages: the widgets' default pictures and their lines (each
picture once), the Colab badge served by the site, links resolved as in the repository, the lesson
header in place of a lesson's badge, the course read from the teaching guide, printed sources and
tables, folds. No browser, no Sphinx: seconds."""

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


def test_the_pages_load_the_colab_badge_from_the_site_and_put_the_lesson_header_under_each_title(pages):
    written = [p for p in pages.rglob("*") if p.suffix in (".md", ".ipynb")]
    assert {p.relative_to(pages).as_posix() for p in written} >= {
        "index.md", "running.md", "docs/teaching.md", "benchmarks/README.md", "benchmarks/maintainers.md",
        *(f"notebooks/{nb.name}" for nb in lessons())}
    for path in written:
        assert site_pages.COLAB_BADGE not in path.read_text(), path
    assert f"]({site_pages.BADGE_FILE})" in (pages / "index.md").read_text()     # the lesson table's badges
    for nb in lessons():
        first = "".join(json.loads((pages / "notebooks" / nb.name).read_text())["cells"][0]["source"])
        title, header = first.split("\n\n")[:2]
        assert title.startswith("# ") and header == f":::{{lesson-header}} {nb.stem}\n:::", first[:300]
        assert "colab" not in first.lower(), first[:300]          # the header has the buttons


def _cell(source, printed):
    return {"cell_type": "code", "source": source, "metadata": {},
            "outputs": [{"output_type": "stream", "name": "stdout", "text": printed}]}


def test_a_printed_source_becomes_a_python_block_and_a_printed_diff_is_coloured_and_long_ones_fold():
    source = "def f(x):\n    return x + 1\n"
    cell = _cell("print(inspect.getsource(f))\nprint('✓ done')", source + "\n✓ done\n")
    site_pages.present_cell(cell)
    kinds = [next(iter(out["data"])) if "data" in out else out["output_type"] for out in cell["outputs"]]
    assert kinds == ["text/markdown", "stream"], cell["outputs"]
    assert cell["outputs"][0]["data"]["text/markdown"] == f"```python\n{source.rstrip()}\n```\n"
    assert cell["outputs"][1]["text"] == "✓ done\n" and "kimik3" not in cell["metadata"]
    diff = "".join(f"{'+' if i % 2 else '-'}     x = {i}\n" for i in range(50))
    cell = _cell("print(inspect.getsource(k))\nprint(diff)", source + "changed:\n" + diff)
    site_pages.present_cell(cell)
    assert cell["metadata"]["mystnb"] == {"text_lexer": "diff"}
    assert cell["metadata"]["kimik3"] == {"fold": "output", "lines": 53, "diff": True}
    # negative controls: the same print without inspect.getsource is left as printed; few asserts, no fold
    cell = _cell("print(text)", source + "changed:\n" + diff)
    site_pages.present_cell(cell)
    assert [out["output_type"] for out in cell["outputs"]] == ["stream"] and cell["metadata"] == {}
    cell = _cell("assert a\n" * (site_pages.FOLD_ASSERTS - 1), "")
    site_pages.present_cell(cell)
    assert "kimik3" not in cell["metadata"]
    cell = _cell("assert a\n" * site_pages.FOLD_ASSERTS, "")
    site_pages.present_cell(cell)
    assert cell["metadata"]["kimik3"] == {"fold": "source", "asserts": site_pages.FOLD_ASSERTS}


def test_a_printed_markdown_table_becomes_a_table():
    table = "| mixer | verdict |\n|---|---|\n| kda | lower on every seed |\n"
    cell = _cell("print(rows)", "the verdicts:\n" + table + "done\n")
    site_pages.present_cell(cell)
    shown = [out.get("data", {}).get("text/markdown") or out.get("text") for out in cell["outputs"]]
    assert shown == ["the verdicts:", table, "done\n"], shown
    cell = _cell("print(rows)", "| not | a table |\nno rule under it\n")      # negative control
    site_pages.present_cell(cell)
    assert [out["output_type"] for out in cell["outputs"]] == ["stream"]


def test_every_lesson_in_the_course_plan_with_its_goals_minutes_and_time():
    course = site_pages.course(ROOT)
    assert [lesson["stem"] for lesson in course] == [nb.stem for nb in lessons()]
    ids = [lesson["id"] for lesson in course]
    teaching = (ROOT / site_pages.TEACHING).read_text()
    times = json.loads((ROOT / site_pages.TIMES).read_text())["seconds"]
    for i, lesson in enumerate(course):
        assert lesson["goals"] and lesson["goals"] in teaching, lesson["id"]
        assert re.search(r"^1\. ", lesson["goals"], re.M), lesson["goals"][:200]
        assert lesson["minutes"] and lesson["seconds"] == times[f"{lesson['stem']}.ipynb"]
        assert all(ids.index(d) < i for d in lesson["builds_on"]), lesson     # only lessons before it
    plan = site_pages.course_plan(teaching)
    assert sorted(i for ids_, _, _ in plan.values() for i in ids_) == sorted(ids)
    assert next(lesson for lesson in course if lesson["id"] == "05b")["builds_on"] == ["03", "05a"]
    broken = teaching.replace("| class | notebooks |", "| class | lessons |")
    with pytest.raises(SystemExit, match="course plan"):                       # negative control
        site_pages.course_plan(broken)


def test_a_picture_a_cell_saved_and_its_widget_drew_again_is_shown_once(pages):
    """The five lessons where a cell draws a figure and the widget after it draws it again at its defaults:
    the page shows that picture once; every other picture stays."""
    twice = 0
    for nb_path in lessons():
        original = json.loads(nb_path.read_text())
        page = json.loads((pages / "notebooks" / nb_path.name).read_text())
        shown = [p for c in page["cells"] for p in site_pages._pictures(c)]
        assert len(shown) == len(set(shown)), nb_path.name
        before = {p for c in original["cells"] for p in site_pages._pictures(c)}
        drawn = {o["data"]["image/png"] for m in site_pages.widget_state(original).values()
                 if m.get("model_name") == "OutputModel" for o in m["state"].get("outputs", [])
                 if "image/png" in o.get("data", {})}
        assert before | drawn == set(shown), nb_path.name                       # nothing else lost
        twice += len(before & drawn)
    assert twice >= 5


def test_a_widget_line_never_points_below_the_picture_it_sits_under(pages):
    cells = [{"cell_type": "markdown", "source": "Try it below: the sliders set the half-life.\n"},
             {"cell_type": "code", "source": "interact(f)"}]
    assert site_pages.what_moving_shows(cells, 1) == "The sliders set the half-life."
    for nb in lessons():
        for cell in json.loads((pages / "notebooks" / nb.name).read_text())["cells"]:
            if "widget-default" in cell["source"]:
                assert not re.search(r"\b(?:it|them|here) below\b", cell["source"]), cell["source"]


def test_the_readme_gives_the_website_of_the_repository():
    (repo,) = repo_url.problems(ROOT)[1]
    assert repo_url.site_url(repo) in (ROOT / "README.md").read_text()
