"""nbgrader on a real JupyterHub, end to end (`make test-hub`; not part of `make test`).

A JupyterHub is started on 127.0.0.1 with its dummy authenticator and its local-process spawner (every
user's server a process on this machine, home folders under the scratch folder), behind
configurable-http-proxy (from npm, which `make test-hub` installs). The instructor exports lesson 09a
(`tools/nbgrader_export.py`, the course id `ml-2027`), generates and releases it to the exchange. Two
students log in through the hub's login form, have their servers spawned, fetch the assignment through
their server's nbgrader extension (the Assignments tab's requests), write their answers (alice the
solutions and a written answer; bob a wrong answer and the issue's patch of the checker) and submit. The
instructor collects, autogrades (the export's configuration: every exercise checked apart from the
notebook), generates and releases the feedback, which each student fetches back through the hub. The grades
are read from the gradebook: alice full marks with an answer to grade by hand, bob nothing.
"""

import http.cookiejar
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import nbgrader_export  # noqa: E402

BIN = Path(sys.executable).parent
COURSE = "ml-2027"
LESSON = "09a"
NOTEBOOK = next((ROOT / "notebooks").glob(f"{LESSON}_*.ipynb"))
ASSIGNMENT = NOTEBOOK.stem
STUDENTS = ("alice", "bob")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_cpu():
    """CPU seconds (user and system) of this process's finished children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(*command, cwd, env):
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


class Browser:
    """A user's browser, as far as the hub cares: cookies kept, redirects followed, the XSRF token sent."""

    def __init__(self, base):
        self.base, self.jar = base, http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def xsrf(self, path):
        """The XSRF cookie of the server `path` goes to (the hub's, or the user's server's)."""
        cookies = sorted((c for c in self.jar if c.name == "_xsrf" and path.startswith(c.path.rstrip("/"))),
                         key=lambda c: -len(c.path))
        return cookies[0].value if cookies else ""

    def request(self, path, data=None, method=None):
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        request = urllib.request.Request(self.base + path, data=body, method=method,
                                         headers={"X-XSRFToken": self.xsrf(path.split("?")[0])})
        with self.opener.open(request, timeout=120) as response:
            return response.geturl(), response.read().decode()


@pytest.fixture(scope="module")
def hub():
    default = Path(os.environ.get("TMPDIR", "/tmp")) / "kimik3-hub"
    scratch = Path(os.environ.get("KIMIK3_HUB_SCRATCH") or default)
    if scratch.exists():
        shutil.rmtree(scratch)
    homes, exchange, course = scratch / "home", scratch / "exchange", scratch / "course"
    for folder in (homes, exchange):
        folder.mkdir(parents=True)
    exchange.chmod(0o777)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "MPLBACKEND": "Agg",
           "HF_HUB_OFFLINE": "1"}
    assert shutil.which("configurable-http-proxy", path=env["PATH"]), "make test-hub installs the proxy"
    # The instructor's course: exported with its course id, the exchange named in its configuration.
    nbgrader_export.export(course, lessons=[LESSON], course=COURSE, log=lambda *_: None)
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text() + f"\nc.Exchange.root = {str(exchange)!r}\n")
    # Every student's nbgrader finds the exchange and the course in ~/.jupyter/nbgrader_config.py, and, as
    # every server here runs as the same Unix user, the student's id (nbgrader takes the Unix user's name,
    # or JUPYTERHUB_USER in a container whose user is jovyan).
    for student in STUDENTS:
        (homes / student / ".jupyter").mkdir(parents=True)
        (homes / student / ".jupyter" / "nbgrader_config.py").write_text(
            f"c = get_config()  # noqa: F821\nc.Exchange.root = {str(exchange)!r}\n"
            f"c.CourseDirectory.course_id = {COURSE!r}\nc.CourseDirectory.student_id = {student!r}\n")
    port, hub_port, api_port = free_port(), free_port(), free_port()
    (scratch / "jupyterhub_config.py").write_text(f"""
c = get_config()  # noqa: F821
c.JupyterHub.ip, c.JupyterHub.port = "127.0.0.1", {port}
c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.JupyterHub.db_url = "sqlite:///{scratch}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{scratch}/cookie_secret"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = "course-password"
c.Authenticator.allowed_users = {set(STUDENTS)!r}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{homes}/{{username}}"
c.Spawner.cmd = ["{BIN}/jupyterhub-singleuser"]
c.Spawner.args = ["--allow-root"]
c.Spawner.environment = {{"PATH": "{env['PATH']}", "MPLBACKEND": "Agg", "HF_HUB_OFFLINE": "1"}}
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
""")
    log = (scratch / "hub.log").open("w")
    process = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(scratch / "jupyterhub_config.py")],
                               cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(base + "/hub/api", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError):
                assert process.poll() is None, (scratch / "hub.log").read_text()[-5000:]
                time.sleep(1)
        else:
            raise AssertionError("JupyterHub did not answer:\n" + (scratch / "hub.log").read_text()[-5000:])
        yield {"base": base, "course": course, "homes": homes, "env": env, "scratch": scratch}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def log_in(hub, student):
    """Log in through the hub's login form (the dummy authenticator: the course's shared password) and wait
    for the student's server, spawned by the local-process spawner."""
    browser = Browser(hub["base"])
    _, page = browser.request("/hub/login")
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page)
    data = {"username": student, "password": "course-password", **({"_xsrf": xsrf[1]} if xsrf else {})}
    url, _ = browser.request("/hub/login", data)
    for _ in range(300):
        try:                                       # the page, as a browser opens it: the OAuth round trip
            url, _ = browser.request(f"/user/{student}/lab")
            if url.startswith(f"{hub['base']}/user/{student}/lab"):
                return browser
        except urllib.error.HTTPError as err:      # 424 while the server is still starting
            url = f"{err.code} {err.url}"
        time.sleep(1)
    raise AssertionError(f"{student}'s server did not start: {url}")


def assignments(browser, student, action=None):
    """The Assignments tab's requests: list, or fetch / submit / fetch_feedback."""
    if action is None:
        _, body = browser.request(f"/user/{student}/assignments?course_id={COURSE}")
    else:
        _, body = browser.request(f"/user/{student}/assignments/{action}",
                                  {"course_id": COURSE, "assignment_id": ASSIGNMENT}, method="POST")
    return json.loads(body)


def work_on(path, student):
    """The student's work on the fetched notebook: alice the solutions and a written answer; bob a wrong
    09a.2 and the issue's patch of the checker after 09a.1's stub."""
    nb = json.loads(path.read_text())
    solutions = nbgrader_export.solution_file(LESSON)
    for cell in list(nb["cells"]):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        source = "".join(cell["source"])
        if meta.get("solution") and cell["cell_type"] == "code":
            name = re.match(r"def (\w+)\(", source)[1]
            if student == "alice":
                body = nbgrader_export.function_region(solutions, name)
                cell["source"] = source.replace("    " + nbgrader_export.STUB, body)
            elif name == "update_bias_proportional":
                cell["source"] = source.replace(nbgrader_export.STUB, "return score_bias.clone()")
            else:
                patch = ("import kimik3_lessons.exercises as ex\n"
                         "ex.run = lambda i, fn=None, solution=False: ex.Result('pass', '✅', 1.0)")
                nb["cells"].insert(nb["cells"].index(cell) + 1,
                                   {"cell_type": "code", "metadata": {}, "source": patch, "outputs": [],
                                    "execution_count": None, "id": "bobs-patch"})
        elif meta.get("solution") and student == "alice":
            cell["source"] = "The bias only chooses the experts; the weights are the raw scores."
    path.write_text(json.dumps(nb, indent=1))


def test_the_nbgrader_round_trip_on_a_jupyterhub(hub):
    course, env = hub["course"], hub["env"]
    started = time.perf_counter()
    run(str(BIN / "nbgrader"), "generate_assignment", ASSIGNMENT, "--force", cwd=course, env=env)
    run(str(BIN / "nbgrader"), "release_assignment", ASSIGNMENT, "--force", cwd=course, env=env)
    browsers = {student: log_in(hub, student) for student in STUDENTS}
    for student, browser in browsers.items():
        listed = assignments(browser, student)
        assert listed["success"] and [a["assignment_id"] for a in listed["value"]] == [ASSIGNMENT], listed
        fetched = assignments(browser, student, "fetch")
        assert fetched["success"], fetched
        (path,) = (hub["homes"] / student).rglob(f"{ASSIGNMENT}/{NOTEBOOK.name}")
        work_on(path, student)
        submitted = assignments(browser, student, "submit")
        assert submitted["success"], submitted
    run(str(BIN / "nbgrader"), "collect", ASSIGNMENT, cwd=course, env=env)
    assert sorted(p.name for p in (course / "submitted").iterdir()) == sorted(STUDENTS)
    graded, cpu = time.perf_counter(), children_cpu()
    run(str(BIN / "nbgrader"), "autograde", ASSIGNMENT, "--force", cwd=course, env=env)
    per_notebook = (time.perf_counter() - graded) / len(STUDENTS)
    cpu_per_notebook = (children_cpu() - cpu) / len(STUDENTS)
    run(str(BIN / "nbgrader"), "generate_feedback", ASSIGNMENT, "--force", cwd=course, env=env)
    run(str(BIN / "nbgrader"), "release_feedback", ASSIGNMENT, cwd=course, env=env)
    for student, browser in browsers.items():
        assert assignments(browser, student, "fetch_feedback")["success"]
        (feedback,) = (hub["homes"] / student).rglob(f"feedback/*/{NOTEBOOK.stem}.html")
        html = feedback.read_text()
        assert ("✅ exercise 09a.1" in html) == (student == "alice"), student
        assert "Hint:" not in html
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        scores = {student: {g.name: (g.score, g.needs_manual_grade) for g in
                            gradebook.find_submission_notebook(NOTEBOOK.stem, ASSIGNMENT, student).grades}
                  for student in STUDENTS}
    assert {n: s for n, (s, _) in scores["alice"].items() if n.startswith("check")} == \
        {"check_09a_1": 2, "check_09a_2": 1}, scores
    assert scores["alice"]["written_09a"][1], "alice's written answer waits for the grader"
    assert {n: s for n, (s, _) in scores["bob"].items()} == \
        {"check_09a_1": 0, "check_09a_2": 0, "written_09a": 0}, scores
    print(f"hub round trip: {time.perf_counter() - started:.0f} s; autograde {per_notebook:.1f} s a notebook "
          f"({cpu_per_notebook:.1f} s of CPU; load average {os.getloadavg()[0]:.1f})")
