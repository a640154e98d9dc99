"""The CI a contributor sees (.github/workflows/ci.yml) runs what `.ci/run` runs: its fast lane, on every
pull request, `make lint` and `make test-unit`; its full lane, every night and by hand, every other target
of `.ci/run`, each a target the Makefile has. A target added to `.ci/run` and not to the workflow fails
here (shown below on a spoiled copy)."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
FAST = ["lint", "test-unit"]

pytestmark = pytest.mark.skipif(not WORKFLOW.exists(), reason="a student edition has no CI workflow")


def ci_run_targets(text):
    """The make targets `.ci/run` runs, in order."""
    return [m[1] for m in re.finditer(r"^make ([\w-]+)\s*$", text, flags=re.M)]


def lanes(workflow):
    """{job: (the events it runs on, the make targets it runs)} of a workflow (a dict)."""
    events = set(workflow[True] if True in workflow else workflow["on"])   # YAML 1.1 reads `on` as True
    out = {}
    for name, job in workflow["jobs"].items():
        runs_on = {e for e in events if re.search(rf"event_name == '{e}'", job.get("if", ""))} or events
        targets = []
        for step in job["steps"]:
            for target in re.findall(r"make ([\w${}. -]+)", step.get("run", "")):
                if "matrix.target" in target:
                    targets += job["strategy"]["matrix"]["target"]
                else:
                    targets.append(target.strip())
        out[name] = (runs_on, targets)
    return out


def problems(workflow, ci_run, makefile):
    """What keeps the workflow from running `.ci/run`'s targets in its two lanes."""
    found = lanes(workflow)
    fast = [job for job, (events, _) in found.items() if "pull_request" in events]
    full = [job for job, (events, _) in found.items() if {"schedule", "workflow_dispatch"} <= events]
    out = []
    if [t for job in fast for t in found[job][1]] != FAST:
        out.append(f"the pull-request lane runs {[t for job in fast for t in found[job][1]]}, not {FAST}")
    wanted = [t for t in ci_run_targets(ci_run) if t != "lint"]
    scheduled = sorted(t for job in full for t in found[job][1])
    if scheduled != sorted(wanted):
        out.append(f"the nightly lane runs {scheduled}, .ci/run {sorted(wanted)}")
    out += [f"no Makefile target {t}" for t in FAST + wanted
            if not re.search(rf"^{re.escape(t)}:", makefile, flags=re.M)]
    return out


def test_the_workflow_runs_ci_run_in_two_lanes():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    ci_run, makefile = (ROOT / ".ci" / "run").read_text(), (ROOT / "Makefile").read_text()
    assert "lint" in ci_run_targets(ci_run)
    assert problems(workflow, ci_run, makefile) == []
    # a target added to .ci/run only, a lane that lost its lint, a target the Makefile lacks: each named
    assert problems(workflow, ci_run + "make test-more\n", makefile) == [
        "the nightly lane runs ['test', 'test-browser', 'test-colab', 'test-site'], .ci/run "
        "['test', 'test-browser', 'test-colab', 'test-more', 'test-site']", "no Makefile target test-more"]
    spoiled = yaml.safe_load(WORKFLOW.read_text())
    spoiled["jobs"]["fast"]["steps"] = [s for s in spoiled["jobs"]["fast"]["steps"] if "lint" not in str(s)]
    assert any("pull-request lane" in p for p in problems(spoiled, ci_run, makefile))
    assert problems(workflow, ci_run, makefile.replace("\ntest-unit:", "\ntest-units:")) == [
        "no Makefile target test-unit"]
