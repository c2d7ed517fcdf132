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
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from conftest import search_tasks, write_search_bench
from rich.console import Console

from forge.cli import main
from forge.config.moves import Move
from forge.config.registry import Registry, load_registry
from forge.evaluation.session import Session
from forge.journal.records import ProposalInvalidRecord, TestRecord, UnscoredCounts
from forge.report.live import LiveView, clock, live_progress, render_progress
from forge.results.failures import FailureTally
from forge.results.model import AttemptResult
from forge.scorers import Score
from forge.search.attempt_cache import AttemptCache
from forge.search.launch import launch_search
from forge.search.progress import SearchProgress
from forge.stats.paired import Interval

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


def fake_rollouts(used: int, executed: int) -> AttemptCache:
    """What SearchProgress reads of the attempt cache: its counts."""
    return cast(AttemptCache, SimpleNamespace(used=used, executed=executed,
                                          failures=FailureTally()))


def progress_at(used: int, *, executed: int, running: int, elapsed: float,
                budget: int | None = 10_000, test: int = 1_000) -> SearchProgress:
    p = SearchProgress(budget_rollouts=budget, test_rollouts=test)
    p.attach(fake_rollouts(used, executed), cast(Session, SimpleNamespace()))
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
    moves = [Move(target="temperature", before=0.7, after=0.6),
             Move(target="retrieval", before="bm25", after="hybrid"),
             Move(target="width", before=4, after=8), Move(target="verify", before=False,
                                                           after=True)]
    p.begin_step(3, moves, None)
    p.screening(moves[0])
    p.screening(moves[1])
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
    p.begin_step(1, [Move(target="knob", before=2, after=3),
                     Move(target="boost", before=False, after=True)], None)
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
    progress = SearchProgress()
    assert live_progress(Console(file=io.StringIO(), force_terminal=False), progress) is None
    assert live_progress(Console(file=io.StringIO(), force_terminal=True), progress) is progress


# -- the command ---------------------------------------------------------------------------

@pytest.fixture
def bench(tmp_path: Path) -> Path:
    return write_search_bench(tmp_path / "bench", HARNESS, tasks=search_tasks(24, 20, 20),
                              metrics=METRICS, search={"budget": {"rollouts": 20_000}})


def under_a_terminal(*args: str, timeout: float = 120.0,
                     interrupt_when: Callable[[], bool] | None = None) -> tuple[int, str]:
    """``forge ARGS`` with stdout, stderr and stdin on a pseudo-terminal; what it drew.
    Once ``interrupt_when()`` is true, SIGINT goes to its process group, as a
    terminal's Ctrl-C does (its own session: the signal reaches forge alone)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "LINES": "40", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "forge", *args], stdin=follower,
                            stdout=follower, stderr=follower, env=env, close_fds=True,
                            start_new_session=True)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if interrupt_when is not None and interrupt_when():
            time.sleep(0.3)  # a frame or two of the panel drawn while it waits
            os.killpg(proc.pid, signal.SIGINT)
            interrupt_when = None
        ready, _, _ = select.select([leader], [], [], 0.2)
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
                  # 2 configs x 20 test tasks x TEST_K 20 (the search's k is 4)
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


# -- the counter, an interrupted search, failures, harness text --------------------------------

#: ``width`` up is a gain: a step moves it, its expansion (the farthest value the same way)
#: is screened and confirmed before it; ``boost`` does nothing.
WIDE = """
def run(config, task, ctx):
    ok = random.Random(ctx.seed).random() < 0.3 + 0.04 * config["width"]
    return {"output": task.expected if ok else "wrong"}
"""
WIDE_REGISTRY = ("name: w\nsettings:\n"
                 "  width: {type: int, min: 1, max: 16, step: 1, default: 2}\n"
                 "  boost: {type: bool, default: false}\n")


def test_the_move_counter_never_passes_its_total(tmp_path: Path) -> None:
    bench = write_search_bench(tmp_path / "bench", WIDE, registry=WIDE_REGISTRY,
                               tasks=search_tasks(40, 30, 10),
                               search={"budget": {"rollouts": 6000}})
    p = SearchProgress()
    seen: list[tuple[str, int, int, str]] = []

    def look() -> None:
        if p.phase in ("screening", "confirming"):
            seen.append((p.phase, p.index, p.of, rendered(p).splitlines()[0]))

    p.on_change = look
    launch_search(bench, journals=tmp_path / "j", run_id="x", progress=p, proposer="sweep")
    assert seen
    assert all(index <= of for _, index, of, _ in seen), seen
    # The expansion of width 2 -> 7 was screened and confirmed: named as what it is.
    assert ("screening", 0, 2, "step 1 · screening an expansion: width 2 -> 16") in seen
    assert any(line.startswith("step 1 · confirming an expansion: width 2 -> 16 · dev look")
               for phase, _, _, line in seen if phase == "confirming")


def test_an_interrupted_search_says_so_and_how_to_resume_it() -> None:
    p = progress_at(500, executed=500, running=0, elapsed=5.0)
    p.resume = "forge search --resume r --journals j"
    p.end("interrupted")
    text = rendered(p)
    assert text.splitlines()[0] == "interrupted; resume with: forge search --resume r --journals j"
    assert text.splitlines()[-1] == "elapsed 0:00:05 · interrupted"
    assert "finished" not in text and "done" not in text
    p.end("failed")
    assert "finished" not in rendered(p) and "done" not in rendered(p)
    p.end()
    assert rendered(p).splitlines()[0] == "finished"


#: The start config runs; while ``hold`` exists, an attempt of any other config hangs.
HOLD = """
import asyncio

HERE = _Path(__file__).parent


async def run(config, task, ctx):
    if config["boost"] and (HERE / "hold").exists():
        (HERE / "held").touch()
        await asyncio.sleep(600)
    ok = random.Random(ctx.seed).random() < 0.5
    return {"output": task.expected if ok else "wrong"}
"""


@pytest.mark.timeout(180)
def test_ctrl_c_on_a_terminal_draws_interrupted_never_finished(tmp_path: Path) -> None:
    bench = write_search_bench(tmp_path / "bench", HOLD, tasks=search_tasks(8, 4, 4), k=2)
    (bench.parent / "hold").touch()
    journals = tmp_path / "j"
    code, drawn = under_a_terminal("search", str(bench), "--journals", str(journals),
                                   "--run-id", "r", "--proposer", "sweep", "--candidates", "2",
                                   interrupt_when=(bench.parent / "held").exists)
    assert code == 130, drawn[-3000:]
    text = ANSI.sub("", drawn)
    resume = f"forge search --resume r --journals {journals}"
    # The panel's last frame (the long path may wrap it: compared without the breaks).
    assert "".join(f"interrupted; resume with: {resume}".split()) in "".join(text.split())
    assert re.search(r"elapsed \d:\d\d:\d\d · interrupted", text)
    assert f"forge: interrupted by SIGINT; resume with: {resume}" in text
    assert "finished" not in text and not re.search(r"\bdone\b", text)


def test_the_panel_shows_the_share_of_failed_attempts_red_above_the_threshold() -> None:
    p = progress_at(40, executed=40, running=0, elapsed=2.0)
    tally = p.failures
    assert tally is not None
    bad = AttemptResult(task_id="dev-01", attempt=0, seed=1, stop_reason="error",
                        error="OSError: \x1b[31mdisk\x1b[0m full on dev-01", duration_s=0.1)
    ok = AttemptResult(task_id="dev-02", attempt=0, seed=2, stop_reason="completed",
                       duration_s=0.1, score=Score(value=1.0, passed=True))
    for _ in range(39):
        tally.add(ok)
    tally.add(bad)
    line = rendered(p, width=200).splitlines()[-2]
    assert line == ("failures 1 of 40 attempts unscored (2.5%) · most: error: OSError: "
                    "\\x1b[#mdisk\\x1b[#m full on <task> (1)")
    for _ in range(3):
        tally.add(bad)
    assert rendered(p, width=200).splitlines()[-2].startswith(
        "failures 4 of 43 attempts unscored (9.3%), above 5% · most: error: OSError:")


def test_the_decision_lines_escape_what_a_harness_or_a_model_wrote() -> None:
    console = Console(width=200, record=True, color_system=None, file=io.StringIO())
    view = LiveView(console)
    view.on_record(ProposalInvalidRecord(
        proposer="llm", category="bad_shape", reason="reply \x1b]0;owned\x07 [bold]x[/]",
        step=1, incumbent="f" * 64))
    text = console.export_text()
    assert "\x1b" not in text and "\x07" not in text
    assert "reply \\x1b]0;owned\\x07 [bold]x[/]" in text  # markup shown, not applied


def test_the_test_line_names_the_tasks_it_left_out_and_both_configs_unscored() -> None:
    # 26 test tasks: the final config never scored 7 of them (it raises on its hard
    # tasks), the start one of them: 19 were compared, and the line says which were not.
    never = [f"test-{i:02d}" for i in (2, 5, 9, 11, 17, 20, 23)]
    ids = [f"test-{i:02d}" for i in range(26)]
    start = UnscoredCounts(n_tasks=26, n_attempts=520, n_unscored=20,
                           unscored_by_reason={"timeout": 20}, n_tasks_without_score=1,
                           tasks_without_score=["test-05"])
    final = UnscoredCounts(n_tasks=26, n_attempts=520, n_unscored=140,
                           unscored_by_reason={"error: ValueError: too long": 140},
                           n_tasks_without_score=7, tasks_without_score=never)
    assert set(never) <= set(ids)
    record = TestRecord(start=0.244, final=1.0, delta=0.685, ci_low=0.494, ci_high=0.876,
                        confidence=0.95, n_tasks=19, k=20, p_value_two_sided=1e-6,
                        unscored_start=start, unscored_final=final)
    console = Console(width=300, record=True, color_system=None, file=io.StringIO())
    LiveView(console).on_record(record)
    lines = console.export_text().splitlines()
    assert lines[0].startswith("test 0.244 -> 1.000, Δ +0.685 (95% CI +0.494 .. +0.876)")
    assert lines[0].endswith(" · 19 of 26 tasks × 20 attempts")
    assert lines[1] == "  unscored on test: start 20 of 520 (3.8%), final 140 of 520 (26.9%)"
    assert lines[2] == ("  7 test tasks left out of the comparison, with no scored attempt: "
                        "start 1 (test-05); final 7 (test-02, test-05, test-09, test-11, "
                        "test-17 and 2 more)")
    # A journal of before the counts: the line as it was.
    console = Console(width=300, record=True, color_system=None, file=io.StringIO())
    LiveView(console).on_record(record.model_copy(update={"unscored_start": None,
                                                            "unscored_final": None}))
    [line] = console.export_text().splitlines()
    assert line.endswith(" · 19 tasks × 20 attempts")


def test_the_test_line_escapes_the_task_ids_it_names() -> None:
    hostile = "t-\x1b[2J[bold]x[/]"
    counts = UnscoredCounts(n_tasks=2, n_attempts=4, n_unscored=2, n_tasks_without_score=1,
                            tasks_without_score=[hostile], unscored_by_reason={"timeout": 2})
    record = TestRecord(start=0.5, final=0.5, delta=0.0, confidence=0.95, n_tasks=1, k=2,
                        p_value_two_sided=1.0, unscored_start=counts, unscored_final=counts)
    console = Console(width=300, record=True, color_system=None, file=io.StringIO())
    LiveView(console).on_record(record)
    text = console.export_text()
    assert "\x1b" not in text and "t-\\x1b[2J[bold]x[/]" in text
