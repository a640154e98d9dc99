"""Every lesson, opened in JupyterLab in headless Chromium, runs from the Run menu without an error, a
failed check or a warning, and its sliders redraw what they drive (see labdriver.py for each check). So
does one lesson of each translated edition (editions/<lang>/): its code cells are the English ones
(tests/test_translations.py), so one per language shows that an edition opens and runs as a student
gets it."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Two of the shortest lessons (CI's time budget): zh_CN's 09a (MoE routing), de's 05a (the delta rule).
EDITIONS = [ROOT / "editions" / "zh_CN" / "notebooks" / "09a_moe_routing.ipynb",
            ROOT / "editions" / "de" / "notebooks" / "05a_delta_rule.ipynb"]


def test_the_course_has_notebooks():
    assert NOTEBOOKS, "no notebooks/*.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_all_in_jupyterlab(path, lab_server, check):
    report = check(lab_server, path)
    if report.problems:
        pytest.fail(report.summary(), pytrace=False)


@pytest.mark.parametrize("path", EDITIONS, ids=[f"{p.parents[1].name}-{p.stem}" for p in EDITIONS])
def test_an_editions_lesson_runs_all_in_jupyterlab(path, lab_server, check):
    report = check(lab_server, path, as_name=f"{path.parents[1].name}-{path.name}")
    if report.problems:
        pytest.fail(report.summary(), pytrace=False)


GLYPHS = """([a, b]) => {
  const draw = (ch) => {
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = 48;
    const ctx = canvas.getContext("2d");
    ctx.font = "40px sans-serif";
    ctx.fillText(ch, 4, 40);
    return Array.from(ctx.getImageData(0, 0, 48, 48).data).join(",");
  };
  return draw(a) !== draw(b);
}"""


def draws_apart(browser, a, b):
    """Whether Chromium draws characters `a` and `b` differently: two glyphs of a font it has, not the
    same empty box for characters no font of the machine covers."""
    page = browser.new_page()
    try:
        return page.evaluate(GLYPHS, [a, b])
    finally:
        page.close()


def test_the_browser_has_a_font_for_chinese(browser):
    """The Chinese edition's text is drawn, not shown as boxes (`make test-browser` installs a font with
    Chromium); two private-use characters, which no font covers, are drawn alike (the check can fail)."""
    assert draws_apart(browser, "中", "丁"), "Chromium draws Chinese as boxes: install fonts-wqy-microhei"
    assert not draws_apart(browser, "\ue000", "\ue001")
