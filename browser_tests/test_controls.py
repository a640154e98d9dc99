"""Negative controls: notebooks (in controls/) that each break one thing, so the suite proves every check
can fail. Each asserts that the checker reports exactly that problem; control_ok proves it reports
nothing on a notebook that is fine."""

from pathlib import Path

CONTROLS = Path(__file__).resolve().parent / "controls"
# Small limits: these notebooks take seconds, and two of them are meant to hit a limit.
LIMITS = {"timeout": 60, "slider_timeout": 15, "widget_timeout": 10}


def test_a_clean_notebook_with_a_slider_passes(lab_server, check):
    report = check(lab_server, CONTROLS / "control_ok.ipynb", **LIMITS)
    assert not report.problems, report.summary()
    assert report.sliders == 1


def test_a_failing_cell_is_caught(lab_server, check):
    report = check(lab_server, CONTROLS / "control_error.ipynb", **LIMITS)
    assert report.kinds() == {"error", "no-execution-count"}, report.summary()
    assert any("AssertionError: 1 + 1 = 2, not 3" in p.message for p in report.problems), report.summary()
    assert any(p.kind == "no-execution-count" and "never reached" in p.where for p in report.problems)


def test_a_failed_exercise_check_is_caught(lab_server, check):
    report = check(lab_server, CONTROLS / "control_failed_check.ipynb", **LIMITS)
    assert report.kinds() == {"failed-check"}, report.summary()


def test_stderr_output_is_caught(lab_server, check):
    report = check(lab_server, CONTROLS / "control_stderr.ipynb", **LIMITS)
    assert report.kinds() == {"stderr"}, report.summary()
    assert "a warning a student should not see" in report.problems[0].message


def test_a_slider_that_does_not_change_the_drawing_is_caught(lab_server, check):
    report = check(lab_server, CONTROLS / "control_slider_no_effect.ipynb", **LIMITS)
    assert report.kinds() == {"slider"}, report.summary()
    assert "did not change what is drawn" in report.problems[0].message


def test_a_widget_that_cannot_render_is_caught(lab_server_without_widgets, check):
    report = check(lab_server_without_widgets, CONTROLS / "control_ok.ipynb", **LIMITS)
    assert report.kinds() == {"widget"}, report.summary()
    assert "not rendered as widgets" in report.problems[0].message
    assert report.sliders == 0


def test_a_notebook_past_its_time_limit_is_interrupted_and_fails(lab_server, check):
    report = check(lab_server, CONTROLS / "control_timeout.ipynb", **dict(LIMITS, timeout=8))
    assert "timeout" in report.kinds(), report.summary()
    timeout = next(p for p in report.problems if p.kind == "timeout")
    assert timeout.where.startswith("cell 2 ") and "did not return" not in timeout.message, report.summary()
    # interrupted: the sleeping cell ends in KeyboardInterrupt and the next cell never runs
    assert report.kinds() <= {"timeout", "error", "no-execution-count"}, report.summary()


def test_an_error_raised_by_moving_a_slider_is_caught(lab_server, check):
    report = check(lab_server, CONTROLS / "control_slider_error.ipynb", **LIMITS)
    assert report.kinds() == {"error"}, report.summary()
    assert "ValueError: n = 5 is too large" in report.problems[0].message, report.summary()
