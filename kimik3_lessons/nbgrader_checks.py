"""nbgrader's autograde, with every exercise checked apart from the notebook (`exercises.isolation`).

nbgrader's own autograde runs the whole submitted notebook in one kernel and reads the graded cells'
outputs: a cell the student wrote before a check can change what the check says. `make nbgrader` writes a
configuration whose autograde runs `IsolatedChecks` in place of nbgrader's `Execute`: for every graded
check cell (grade id `check_<exercise>`), the student's function is taken out of the notebook and checked
alone in a fresh process, hints off, and the cell's outputs become the verdict line and the points earned
(nbgrader reads a number printed as the cell's result as partial credit). Nothing else of the notebook runs,
so a timeout or a crash costs only that exercise. Written answers (manually graded cells) are left for the
grader. Needs nbgrader (it subclasses its preprocessor); imported by nbgrader from the configuration.
"""

from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer

from kimik3_lessons.exercises import get, isolation
from kimik3_lessons.grading import cores


class IsolatedChecks(NbGraderPreprocessor):
    """Checks every exercise of a submission apart from the notebook; the graded cells get the verdicts."""

    timeout = Integer(isolation.TIMEOUT, help="seconds one exercise's check may run").tag(config=True)
    workers = Integer(0, help="exercises checked at once (0: the machine's cores)").tag(config=True)

    def preprocess(self, nb, resources):
        code, graded = [], {}
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            grade_id = meta.get("grade_id", "")
            if cell.cell_type == "code" and meta.get("grade") and grade_id.startswith("check_"):
                exercise = get(grade_id.removeprefix("check_").replace("_", "."))
                graded[exercise.id] = (cell, isolation.function_source(code, exercise.name))
            if cell.cell_type == "code":
                code.append(cell.source)
        results = isolation.check({i: source for i, (_, source) in graded.items()}, timeout=self.timeout,
                                  workers=self.workers or cores())
        for exercise_id, (cell, _) in graded.items():
            result = results[exercise_id]
            points = round(float(cell.metadata.nbgrader["points"]) * result["score"], 2)
            cell.outputs = [new_output("stream", name="stdout", text=result["line"] + "\n"),
                            new_output("execute_result", data={"text/plain": f"{points:g}"},
                                       execution_count=1)]
            self.log.info("%s: %s", exercise_id, result["line"])
        return nb, resources
