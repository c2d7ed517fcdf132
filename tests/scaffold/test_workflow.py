"""The GitHub Actions workflow ``forge init`` writes (``ci/forge.yml``), run for real: its
``run:`` steps that call forge are executed by bash, as a runner would, in a scratch
repository holding a scaffolded bench, with ``forge`` on PATH being this forge.

What a user relies on: the baseline command in its header works; an unchanged bench
passes (exit 0); a config that breaks tasks fails the job (exit 1) with JUnit XML
that names the failing gate and tasks; a better config passes; a bench whose code
changed is refused as incomparable (exit 2), and so is a missing baseline. On a fresh
runner, the install step installs forge from the bench's requirements.txt as
``forge init`` wrote it, and the job passes on its first run; an agent that starts
failing on a third of its attempts fails the job with the ``unscored`` gate named."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import copy_forge_source, offline_venv

from forge.scaffold import init_bench

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Step:
    name: str
    run: str


@dataclass(frozen=True)
class Repo:
    root: Path
    workflow: dict[str, Any]
    env: dict[str, str]

    @property
    def bench(self) -> Path:
        return self.root / self.env["BENCH"]

    def forge_steps(self) -> list[Step]:
        """The steps whose script calls forge, in the workflow's order."""
        steps = self.workflow["jobs"]["gate"]["steps"]
        return [Step(s["name"], s["run"]) for s in steps
                if "run" in s and re.search(r"^\s*forge\s", s["run"], re.M)]

    def install_step(self) -> Step:
        """The step that installs forge and what the harness imports."""
        (step,) = [Step(s["name"], s["run"]) for s in self.workflow["jobs"]["gate"]["steps"]
                   if s.get("name", "").startswith("Install")]
        return step

    def bash(self, script: str) -> subprocess.CompletedProcess[str]:
        # `shell: bash` on a GitHub runner: bash --noprofile --norc -eo pipefail {0}.
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                              cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=180, check=False)

    def run_job(self) -> list[tuple[str, int, str]]:
        """Run the forge steps until one fails, as the job would: (name, exit, stderr)."""
        ran = []
        for step in self.forge_steps():
            done = self.bash(step.run)
            ran.append((step.name, done.returncode, done.stderr))
            if done.returncode != 0:
                break
        return ran


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Repo, str]:
    """A repository with a bench made by ``forge init bench`` at its root, and an
    environment where ``forge`` is this forge (the install step is the runner's)."""
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.chdir(root)
    made = init_bench("bench")
    text = (made.folder / "ci" / "forge.yml").read_text(encoding="utf-8")
    workflow = yaml.safe_load(text)
    shim = tmp_path / "bin" / "forge"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m forge \"$@\"\n")
    shim.chmod(0o755)
    env = {**os.environ, **workflow["jobs"]["gate"]["env"],
           "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "COLUMNS": "120"}
    # The header's command makes the baseline; the test runs it as the user would.
    header = [line.removeprefix("#").strip() for line in text.splitlines()
              if re.match(r"#\s+forge eval ", line)]
    assert header == ["forge eval bench --save bench/baseline.json"]
    return Repo(root, workflow, env), header[0]


def _set_defaults(bench: Path, **values: Any) -> None:
    defaults = bench / "defaults.yaml"
    config = yaml.safe_load(defaults.read_text())
    defaults.write_text(yaml.safe_dump({**config, **values}, sort_keys=False))


def _junit(path: Path, gate: str = "regression") -> dict[str, Any]:
    """The report, parsed (so well-formed): gate -> its failure message or None, and
    the tasks listed as failing ``gate``."""
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "forge-gate"
    gates = {}
    for case in suite.iter("testcase"):
        if case.get("classname") == "forge-gate":
            failure = case.find("failure")
            gates[case.get("name")] = None if failure is None else failure.get("message")
    failing_tasks = [c.get("name") for c in suite.iter("testcase")
                     if c.get("classname") == f"forge-gate.{gate}"]
    return {"gates": gates, "failures": int(root.get("failures", "-1")),
            "failing_tasks": failing_tasks}


def test_the_workflow_is_a_job_of_the_steps_it_documents(repo: tuple[Repo, str]) -> None:
    r, _ = repo
    assert r.workflow["name"] == "forge"
    triggers = r.workflow.get("on", r.workflow.get(True))  # YAML 1.1 reads `on` as true
    assert set(triggers) == {"pull_request", "push"}
    steps = r.workflow["jobs"]["gate"]["steps"]
    assert [s.get("uses", "").split("@")[0] for s in steps[:2]] == ["actions/checkout",
                                                                   "actions/setup-python"]
    assert steps[2]["run"].splitlines()[:2] == [
        'cd "$BENCH"   # a path in requirements.txt is relative to the bench folder',
        "python -m pip install -r requirements.txt"]
    assert [s.name for s in r.forge_steps()] == ["Evaluate the default config",
                                                 "Gate against the baseline"]
    upload = steps[-1]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    assert "report.xml" in upload["with"]["path"]


def test_a_gated_job_passes_fails_on_a_regression_and_names_the_gate(
        repo: tuple[Repo, str]) -> None:
    r, baseline_command = repo
    made = r.bash(baseline_command)
    assert made.returncode == 0, made.stderr
    assert (r.bench / "baseline.json").is_file()

    # 1. Nothing changed: every step exits 0 and the report has no failure.
    assert [(name, code) for name, code, _ in r.run_job()] == [
        ("Evaluate the default config", 0), ("Gate against the baseline", 0)]
    report = _junit(r.root / "report.xml")
    assert report["failures"] == 0 and report["gates"]["regression"] is None
    assert "forge gate: ✅ passed" in Path(r.env["GITHUB_STEP_SUMMARY"]).read_text()

    # 2. A pull request raises the temperature: tasks lose attempts, the gate fails.
    _set_defaults(r.bench, temperature=1.0)
    (_, code_eval, _), (_, code_gate, err) = r.run_job()
    assert (code_eval, code_gate) == (0, 1), err
    report = _junit(r.root / "report.xml")
    assert report["gates"]["aggregate"] is None  # the pass-rate floor (0) still holds
    assert "dropped more than 0.0%" in report["gates"]["regression"]
    assert report["failures"] == 1 + len(report["failing_tasks"]) >= 2
    assert all(t.startswith("dev-") for t in report["failing_tasks"])
    assert "❌ regression" in Path(r.env["GITHUB_STEP_SUMMARY"]).read_text()

    # 3. A better config (the one a first search proves) passes: no task got worse.
    _set_defaults(r.bench, temperature=0.0, prompt="stepwise")
    assert [code for _, code, _ in r.run_job()] == [0, 0]
    assert _junit(r.root / "report.xml")["failures"] == 0


def test_a_changed_bench_or_a_missing_baseline_is_refused(repo: tuple[Repo, str]) -> None:
    r, baseline_command = repo
    # No baseline committed yet: the gate step says which file, exit 2.
    (_, code_eval, _), (_, code_gate, err) = r.run_job()
    assert (code_eval, code_gate) == (0, 2)
    assert err.strip().splitlines() == [
        "forge: error: bench/baseline.json: file not found"]

    assert r.bash(baseline_command).returncode == 0
    harness = r.bench / "harness.py"
    harness.write_text(harness.read_text() + "\n# a change to the agent's code\n")
    (_, code_eval, _), (_, code_gate, err) = r.run_job()
    assert (code_eval, code_gate) == (0, 2)
    [line] = err.strip().splitlines()
    assert line.startswith("forge: error: ") and "Traceback" not in err
    assert not (r.root / "report.xml").exists()  # no verdict on incomparable results


#: The agent's own code, outside the bench folder (so a change to it is what the gate
#: judges, not a new environment): a tool the harness calls before answering.
TOOLS_OK = """
def check(task_id, seed):
    return None
"""
#: The same tool broken by a pull request: it fails on about a third of the calls.
TOOLS_FLAKY = """
import random


def check(task_id, seed):
    if random.Random(seed).random() < 0.3:
        raise RuntimeError(f"tool call timed out for {task_id}")
"""
#: What the harness gains so that it calls the agent's tool first.
CALLS_THE_TOOL = """

import agent_tools  # the agent's own code, from the repository's root

_toy_run = run


def run(config, task, ctx):  # noqa: F811 - the agent's tool runs first
    agent_tools.check(task.id, ctx.seed)
    return _toy_run(config, task, ctx)
"""


@pytest.fixture
def fresh_runner(tmp_path: Path) -> tuple[Repo, str]:
    """A git repository holding a copy of forge's source in ``vendor/forge`` and a bench
    written by that forge (``python -m forge init bench`` from the repository's root,
    a real process), with the environment of a fresh runner: a new virtualenv first on
    PATH with no forge in it (forge's dependencies come from PYTHONPATH, offline; see
    :func:`conftest.offline_venv`). forge is there only once the install step ran."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, timeout=60)
    source = copy_forge_source(root / "vendor" / "forge")
    env = offline_venv(tmp_path / "venv")
    env["PYTHONPATH"] += f"{os.pathsep}{root}"  # the agent's code, as the runner installs it
    made = subprocess.run(["python", "-m", "forge", "init", "bench"], cwd=root,
                          env={**env, "PYTHONPATH": f"{source}{os.pathsep}{env['PYTHONPATH']}"},
                          capture_output=True, text=True, timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    text = (root / "bench" / "ci" / "forge.yml").read_text(encoding="utf-8")
    workflow = yaml.safe_load(text)
    env.update(workflow["jobs"]["gate"]["env"], GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
               COLUMNS="120")
    return Repo(root, workflow, env), "forge eval bench --save bench/baseline.json"


def test_first_run_installs_forge_and_a_failing_agent_fails_the_unscored_gate(
        fresh_runner: tuple[Repo, str]) -> None:
    r, baseline_command = fresh_runner
    # forge init wrote the forge it ran from, by its path in this repository.
    requirements = (r.bench / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert "../vendor/forge" in requirements
    assert r.bash("command -v forge || true").stdout == ""  # nothing installed yet

    install = r.bash(r.install_step().run)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    forge_bin = Path(r.bash("command -v forge").stdout.strip())
    assert forge_bin.parent == Path(r.env["PATH"].split(os.pathsep)[0])  # the runner's venv
    where = r.bash("python -c 'import forge; print(forge.__file__)'").stdout
    assert "site-packages" in where  # installed, not read from the copy

    (r.root / "agent_tools.py").write_text(TOOLS_OK, encoding="utf-8")
    harness = r.bench / "harness.py"
    harness.write_text(harness.read_text(encoding="utf-8") + CALLS_THE_TOOL, encoding="utf-8")
    made = r.bash(baseline_command)
    assert made.returncode == 0, made.stderr

    # 1. The first run on the baseline's config: green, the unscored gate included.
    assert [(name, code) for name, code, _ in r.run_job()] == [
        ("Evaluate the default config", 0), ("Gate against the baseline", 0)]
    report = _junit(r.root / "report.xml", "unscored")
    assert report["failures"] == 0 and "unscored" in report["gates"]

    # 2. A pull request breaks the agent's tool on about 30% of the calls: the pass
    # rate of what still finishes is unchanged, the unscored share is not.
    (r.root / "agent_tools.py").write_text(TOOLS_FLAKY, encoding="utf-8")
    (_, code_eval, _), (_, code_gate, err) = r.run_job()
    assert (code_eval, code_gate) == (0, 1), err
    current = json.loads((r.root / "current.json").read_text(encoding="utf-8"))
    attempts = [a for t in current["tasks"] for a in t["attempts"]]
    failed = sum(1 for a in attempts if a["stop_reason"] == "error")
    assert 0.2 < failed / len(attempts) < 0.4
    report = _junit(r.root / "report.xml", "unscored")
    message = report["gates"]["unscored"]
    assert message.startswith(f"unscored {100 * failed / len(attempts):.1f}% ({failed} of "
                              f"{len(attempts)}: {failed} × error: RuntimeError: tool call "
                              "timed out for <task>) vs 0.0% (0 of ")
    assert "beyond chance" in message
    assert report["gates"]["regression"] is None  # what finished scores as before
    assert report["failing_tasks"] and all(t.startswith("dev-") for t in report["failing_tasks"])
    assert "❌ unscored" in Path(r.env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")

    # 3. Fixed again: green.
    (r.root / "agent_tools.py").write_text(TOOLS_OK, encoding="utf-8")
    assert [code for _, code, _ in r.run_job()] == [0, 0]


def _fenced_after(page: Path, heading: str) -> str:
    """The first fenced block after ``heading`` in a Markdown page."""
    text = page.read_text(encoding="utf-8")
    match = re.search(re.escape(heading) + r".*?```[a-z]*\n(.*?)```", text, re.S)
    assert match, heading
    return match.group(1)


def test_the_ci_guide_shows_the_workflow_forge_init_writes(repo: tuple[Repo, str]) -> None:
    r, _ = repo
    guide = Path(__file__).resolve().parents[2] / "docs" / "guide" / "ci.md"
    written = (r.bench / "ci" / "forge.yml").read_text(encoding="utf-8")
    assert _fenced_after(guide, "## The workflow") == written
