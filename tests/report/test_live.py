"""The live view of ``forge search`` on a terminal: what it draws, and when it is quiet.

The panel is rendered to a fixed-width rich console from a constructed progress; the
command itself runs under a pseudo-terminal (python's ``pty``), which is what makes
stdout a terminal, and the phases it went through must appear in what it drew.
"""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from conftest import search_tasks, write_search_bench
from rich.console import Console

from forge.attempt_cache import Rollouts
from forge.cli import main
from forge.moves import Move
from forge.progress import SearchProgress
from forge.registry import Registry, load_registry
from forge.report.live import clock, live_progress, render_progress
from forge.results import AttemptResult
from forge.stats import Interval

# A dev-only gain (knob 3: val refuses it), a real one (boost) and a costly one (knob 1):
# a search that screens, confirms with dev and val looks, promotes, and opens test.
HARNESS = """
def run(config, task, ctx):
    record(config, task, ctx)
    time.sleep(0.002)
    dev = task.id.startswith("dev")
    p = 0.5 + (0.3 if config["boost"] else 0.0)
    if config["knob"] == 3:
        p += 0.4 if dev else -0.3
    if config["knob"] == 1:
        p += 0.3
    ok = random.Random(ctx.seed).random() < min(p, 0.95)
    cost = (1.1 if config["boost"] else 1.0) * (3.0 if config["knob"] == 1 else 1.0)
    return {"output": task.expected if ok else "wrong", "cost": cost}
"""
METRICS = {"cost": {"direction": "lower", "max_increase": 0.25, "relative": True}}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def fake_rollouts(used: int, executed: int) -> Rollouts:
    """What SearchProgress reads of the attempt cache: its counts and its session."""
    return cast(Rollouts, SimpleNamespace(used=used, executed=executed,
                                          session=SimpleNamespace()))


def progress_at(used: int, *, executed: int, running: int, elapsed: float,
                budget: int | None = 10_000, test: int = 1_000) -> SearchProgress:
    p = SearchProgress(budget_rollouts=budget, test_rollouts=test)
    p.attach(fake_rollouts(used, executed))
    for _ in range(executed + running):
        p.attempt_done(cast(AttemptResult, None))  # only counted
    p.started = time.monotonic() - elapsed
    return p


def rendered(p: SearchProgress, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(render_progress(p))
    return console.export_text()


def test_the_panel_shows_phase_rollouts_of_the_budget_incumbent_elapsed_and_eta() -> None:
    # 3,800 counted + 200 of the batch now running; 2,000 run in 10 s: 200 a second;
    # left: 6,000 of the budget + 1,000 for the test split = 7,000, so 35 s.
    p = progress_at(3_800, executed=1_800, running=200, elapsed=10.0)
    p.begin_step(3, 4, None)
    p.screening(Move(target="temperature", before=0.7, after=0.6))
    p.screening(Move(target="retrieval", before="bm25", after="hybrid"))
    p.incumbent = Interval(0.689, 0.609, 0.769, 110, 0.95)
    p.promotions = 2
    assert p.spent == 4_000 and p.rate == pytest.approx(200.0, rel=0.01)
    assert p.rollouts_left == 7_000
    assert p.eta_s == pytest.approx(35.0, rel=0.01)
    lines = rendered(p).splitlines()
    assert lines[0] == "step 3 · screening move 2 of 4: retrieval 'bm25' -> 'hybrid'"
    assert lines[1].startswith("rollouts 4,000 of 10,000 (40%) ")
    assert lines[2] == "incumbent dev 0.689 ± 0.080 (95% CI, 110 tasks) · 2 promoted"
    assert lines[3] == "elapsed 0:00:10 · ETA ≤ 0:00:35: 7,000 rollouts left (with test) at 200/s"
    assert all(len(line) <= 80 for line in lines)


def test_confirming_counts_its_dev_then_val_looks_and_test_counts_down_the_test_split(
        tmp_path: Path) -> None:
    registry = load_registry_text(tmp_path)
    cand = registry.validate_config({"boost": True, "knob": 2})
    other = registry.validate_config({"boost": False, "knob": 2})
    p = progress_at(500, executed=500, running=0, elapsed=5.0)
    p.begin_step(1, 2, None)
    p.screening(Move(target="knob", before=2, after=3))
    p.screening(Move(target="boost", before=False, after=True))
    p.confirming(Move(target="boost", before=False, after=True), cand)
    for config, split in ((cand, "dev"), (other, "dev"), (cand, "dev"), (cand, "val")):
        p.batch(config, split, 10)
    assert (p.dev_looks, p.val_looks) == (2, 1)
    assert rendered(p).splitlines()[0] == (
        "step 1 · confirming move 2 of 2: boost False -> True · val look 1 (dev 2)")
    p.testing()
    assert p.rollouts_left == 1_000  # the test split, all of it still to run
    lines = rendered(p).splitlines()
    assert lines[0] == "test split: start and final config, once, 1,000 rollouts"
    assert lines[-1].startswith("elapsed 0:00:05 · ETA 0:00:10: 1,000 rollouts left")


def test_without_a_budget_or_a_pace_the_eta_says_why_it_is_unknown() -> None:
    p = progress_at(0, executed=0, running=0, elapsed=1.0, budget=None)
    assert p.eta_s is None
    text = rendered(p)
    assert "rollouts 0 (no rollout budget)" in text
    assert "ETA — (no rollout budget)" in text
    q = progress_at(0, executed=0, running=0, elapsed=1.0)
    assert "ETA — (no pace yet)" in rendered(q)
    assert clock(3725.4) == "1:02:05" and clock(None) == "—"


def load_registry_text(tmp_path: Path) -> Registry:
    path = tmp_path / "registry.yaml"
    path.write_text("name: s\nsettings:\n  boost: {type: bool, default: false}\n"
                    "  knob: {type: int, min: 1, max: 3, step: 1, default: 2}\n",
                    encoding="utf-8")
    return load_registry(path)


def test_no_live_view_off_a_terminal() -> None:
    assert live_progress(Console(file=io.StringIO(), force_terminal=False)) is None
    assert live_progress(Console(file=io.StringIO(), force_terminal=True)) is not None


# -- the command ---------------------------------------------------------------------------

@pytest.fixture
def bench(tmp_path: Path) -> Path:
    return write_search_bench(tmp_path / "bench", HARNESS, tasks=search_tasks(24, 20, 20),
                              metrics=METRICS, search={"budget": {"rollouts": 20_000}})


def under_a_terminal(*args: str, timeout: float = 120.0) -> tuple[int, str]:
    """``forge ARGS`` with stdout, stderr and stdin on a pseudo-terminal; what it drew."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "LINES": "40", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "forge", *args], stdin=follower,
                            stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            data = os.read(leader, 65536)
        except OSError:  # the follower closed: the process has ended
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    code = proc.wait(timeout=10)
    return code, b"".join(chunks).decode("utf-8", errors="replace")


def test_forge_search_on_a_terminal_draws_every_phase(bench: Path, tmp_path: Path) -> None:
    code, drawn = under_a_terminal("search", str(bench), "--journals", str(tmp_path / "j"),
                                   "--run-id", "live")
    assert code == 0, drawn[-3000:]
    text = ANSI.sub("", drawn)
    for phase in ("start evaluation: the start config's first dev chunk",
                  "step 1 · screening move 1 of 2: ",
                  "step 1 · confirming move ",
                  "· dev look 1", "· val look 1 (dev ",
                  # 2 configs x 20 test tasks x test_k 20 (the search's k is 4)
                  "test split: start and final config, once, 800 rollouts",
                  "finished\r\n"):
        assert phase in text, phase
    assert re.search(r"rollouts [\d,]+ of 20,000 \(\d+%\)", text)
    assert re.search(r"incumbent dev \d\.\d{3} ± \d\.\d{3} \(95% CI, \d+ tasks\)", text)
    assert re.search(r"ETA ≤ \d:\d\d:\d\d: [\d,]+ rollouts left \(with test\) at [\d,]+/s", text)
    # The decision lines and the summary are still there, above the panel.
    assert "PROMOTED" in text and "promoted: boost False->True" in text


def test_forge_search_json_on_a_terminal_draws_no_live_view(bench: Path, tmp_path: Path) -> None:
    code, drawn = under_a_terminal("search", str(bench), "--journals", str(tmp_path / "j"),
                                   "--run-id", "quiet", "--json")
    assert code == 0, drawn[-3000:]
    text = ANSI.sub("", drawn)
    assert "screening move" not in text and "ETA" not in text
    assert '"run_id": "quiet"' in text


def test_forge_search_off_a_terminal_prints_the_decisions_only(
        bench: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", str(bench), "--journals", str(tmp_path / "j")]) == 0
    out = capsys.readouterr().out
    assert "PROMOTED" in out
    assert "screening move" not in out and "ETA" not in out and "\x1b[" not in out
