"""``forge report RUN --html F``: one self-contained page that shows a run truthfully.

The run is a real search on a small bench where ``boost`` is a real gain (0.5 ->
0.8) with a tolerated cost (+10% of an allowed +25%), so the page has a promotion,
rejected candidates, an auxiliary metric, learning-zone tasks and a test result.
The page's numbers are checked against the journal and the attempt store, and a
real headless browser (Debian's ``chromium``) loads it: no console output at all,
every chart laid out with content, and the charts visible in a screenshot.
"""

from __future__ import annotations

import gzip
import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import COSTLY_BOOST, readable_bytes, search_tasks, write_search_bench

from forge.cli import main
from forge.errors import JournalError
from forge.journal.store import AttemptStore, store_file
from forge.report.html import load_report, render_html, write_html
from forge.report.html._svg import COLORS
from forge.search.launch import launch_search

BOOST = COSTLY_BOOST
METRICS = {"cost": {"direction": "lower", "max_increase": 0.25, "relative": True}}
CHART_IDS = ("chart-test", "chart-scores", "chart-forest", "chart-budget")


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished search run ``r1`` (about a second), shared by the tests here."""
    root = tmp_path_factory.mktemp("report")
    bench = write_search_bench(root / "bench", BOOST, tasks=search_tasks(24, 20, 20),
                               metrics=METRICS)
    launch_search(bench, run_id="r1", journals=root / "journals")
    return root / "journals"


@pytest.fixture
def copy_run(journals: Path, tmp_path: Path) -> Path:
    """A private copy of ``r1`` that a test may damage."""
    return Path(shutil.copytree(journals / "r1", tmp_path / "runs" / "r1"))


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


# -- content ---------------------------------------------------------------------------------

def test_the_page_is_self_contained_with_every_chart_and_the_test_result(
        journals: Path) -> None:
    page = render_html(journals / "r1")
    lowered = page.lower()
    for external in ("http://", "https://", "//cdn", "<script src", "<link", "@import",
                     "url(", "<iframe", "<img"):
        assert external not in lowered, external
    # The browser itself refuses any network load: a policy in the page says so.
    assert "content-security-policy" in lowered
    assert "default-src 'none'" in html.unescape(page)
    for chart in CHART_IDS:
        assert re.search(rf'<svg class="chart" id="{chart}"', page), chart
    for table in ("aux-table", "zone-table", "config-table"):
        assert f'id="{table}"' in page
    test = next(r for r in records(journals / "r1") if r["kind"] == "test")
    assert isinstance(test["delta"], float) and isinstance(test["ci_low"], float)
    assert test["ci_low"] > 0  # the bench's gain is large: the test result must say so
    result = re.search(r'<p class="headline good" id="test-result">(.*?)</p>', page)
    assert result is not None
    assert f"Δ {test['delta']:+.3f}" in result.group(1)
    assert f"95% CI {test['ci_low']:+.3f} .. {test['ci_high']:+.3f}" in result.group(1)


def test_incumbent_scores_per_step_are_the_searchs_own_means(journals: Path) -> None:
    report = load_report(journals / "r1")
    recs = records(journals / "r1")
    start = next(r for r in recs if r["kind"] == "start")
    end = next(r for r in recs if r["kind"] == "end")
    promotions = [r for r in recs if r.get("verdict") == "promoted"]
    assert len(promotions) >= 1
    assert [i.step for i in report.incumbents] == [0, *(p["step"] for p in promotions)]
    first, last = report.incumbents[0], report.incumbents[-1]
    assert first.dev is not None and first.val is not None
    assert last.dev is not None and last.val is not None
    # The start record has the first screening chunk only (the rest of the start's
    # evaluation runs when a decision needs it); the end record compares start and final
    # on the tasks both ran, here every dev task and the val tasks the gates reached.
    assert start["dev_tasks"] < first.dev.n and start["val_mean"] is None
    assert first.dev.mean == pytest.approx(end["dev"]["start"])
    assert first.val.mean == pytest.approx(end["val"]["start"])
    assert last.dev.mean == pytest.approx(end["dev"]["final"])
    assert last.val.mean == pytest.approx(end["val"]["final"])
    assert last.fingerprint == end["final_fingerprint"]
    for inc in report.incumbents:
        for iv in (inc.dev, inc.val):
            assert iv is not None and iv.confidence == 0.95 and iv.low < iv.mean < iv.high


def test_the_forest_plot_has_a_row_per_decision_and_marks_promotions(journals: Path) -> None:
    page = render_html(journals / "r1")
    decisions = [r for r in records(journals / "r1") if r["kind"] == "candidate"]
    verdicts = [str(d["verdict"]) for d in decisions]
    rows = re.findall(r'<g class="decision (\w+)">', page)
    assert rows == verdicts
    assert "rejected" in rows
    assert page.count("★ promoted") == verdicts.count("promoted") >= 1


def test_learning_zone_tasks_are_those_the_final_config_sometimes_passes(
        journals: Path) -> None:
    report = load_report(journals / "r1")
    assert report.k == 4
    store = AttemptStore(store_file(journals / "r1"))
    expected = []
    ran = 0  # the dev tasks the final config ran on the screening seeds
    for i in range(24):
        attempts = [store.get(report.final_fingerprint, "dev", f"dev-{i:02d}", a)
                    for a in range(4)]
        scored = [a for a in attempts if a is not None and a.scored]
        ran += bool(scored)
        passed = sum(a.passed for a in scored)
        if 0 < passed < len(scored):
            expected.append(f"dev-{i:02d}")
    assert expected  # p = 0.8, k = 4: some tasks are in the zone
    assert sorted(z.task_id for z in report.zone) == expected
    page = render_html(journals / "r1")
    assert f"{len(expected)} of {ran} dev tasks are in the learning zone" in page


def test_the_aux_table_shows_each_promotions_metrics_and_gate(journals: Path) -> None:
    page = render_html(journals / "r1")
    table = re.search(r'<table id="aux-table">(.*?)</table>', page, re.S)
    assert table is not None
    assert "<th>cost</th>" in table.group(1)
    assert '<td class="pass">1 → 1.1' in table.group(1)
    assert "allowed +25.0%" in table.group(1)


def test_journal_text_is_escaped(copy_run: Path) -> None:
    lines = (copy_run / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    for n, line in enumerate(lines):
        record = json.loads(line)
        if record["kind"] == "candidate":
            record["reason"] = hostile
            record["move"]["target"] = "<b>knob</b>"
            lines[n] = json.dumps(record)
            break
    (copy_run / "journal.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = render_html(copy_run)
    assert "<script>alert" not in page and "<img" not in page and "<b>knob" not in page
    assert page.count("<script>") == 2  # the page's own two
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;knob&lt;/b&gt;" in page


def test_a_decision_says_its_kind_of_move_and_precision_round(copy_run: Path) -> None:
    lines = (copy_run / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines):
        record = json.loads(line)
        if record["kind"] == "candidate":
            record.update(move_kind="jump", precision_round=2)
            lines[n] = json.dumps(record)
            break
    (copy_run / "journal.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = render_html(copy_run)
    assert page.count(" (jump) (precision round 2)") == 1


def test_a_decision_that_waited_for_its_confirmation_says_why(copy_run: Path) -> None:
    lines = (copy_run / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    why = "its confirmation projects to need 3,741 rollouts & 2,725 are left"
    for n, line in enumerate(lines):
        record = json.loads(line)
        if record["kind"] == "candidate":
            record.update(deferred=why)
            lines[n] = json.dumps(record)
            break
    (copy_run / "journal.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = render_html(copy_run)
    assert page.count("<li>deferred: its confirmation projects to need 3,741 rollouts "
                      "&amp; 2,725 are left</li>") == 1


def test_a_verdict_of_another_word_is_refused_before_it_reaches_the_markup(
        copy_run: Path) -> None:
    # The verdict is written into a class attribute: only the three words may get there.
    lines = (copy_run / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    n, record = next((n, r) for n, r in enumerate(map(json.loads, lines))
                     if r["kind"] == "candidate")
    lines[n] = json.dumps({**record, "verdict": '"><script>alert(3)</script>'})
    (copy_run / "journal.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(JournalError, match=rf"journal\.jsonl:{n + 1}: verdict: damaged "
                                           "candidate record") as err:
        render_html(copy_run)
    assert "\n" not in str(err.value)


def test_an_unfinished_run_still_reports_what_it_has(copy_run: Path) -> None:
    lines = (copy_run / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    (copy_run / "journal.jsonl").write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    page = render_html(copy_run)
    assert "The test split was not opened" in page
    assert "The run has not finished" in page
    for chart in CHART_IDS[1:]:
        assert f'id="{chart}"' in page


def test_a_run_without_its_attempt_store_reports_the_journal(copy_run: Path) -> None:
    (copy_run / "attempts.jsonl.gz").unlink()
    page = render_html(copy_run)
    assert "no per-step scores: no attempt store in the run folder" in page
    assert '<g class="decision promoted">' in page


# -- the command -----------------------------------------------------------------------------

def test_report_writes_the_default_path_or_html_atomically(
        journals: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = journals / "r1"
    assert main(["report", "r1", "--journals", str(journals)]) == 0
    written = folder / "report.html"
    assert capsys.readouterr().out.strip() == f"report: {written}"
    assert written.read_text(encoding="utf-8") == render_html(folder)
    assert not list(folder.glob(".report.html.*"))  # no temp file left behind
    out = tmp_path / "sub" / "page.html"
    assert main(["report", str(folder), "--html", str(out)]) == 0  # a folder path as RUN
    assert out.read_text(encoding="utf-8") == render_html(folder)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("forge: error: "), err
    assert "Traceback" not in err
    return err


def test_an_unknown_run_is_one_line_and_exit_2(
        journals: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "nope", "--journals", str(journals)]) == 2
    assert "nope/run.json: no such run" in one_error_line(capsys)


@pytest.mark.parametrize("damage", ["journal", "attempts", "run.json", "no-start"])
def test_a_damaged_run_is_one_line_and_exit_2_and_writes_nothing(
        copy_run: Path, damage: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = {"journal": "journal.jsonl", "attempts": "attempts.jsonl.gz", "run.json": "run.json",
            "no-start": "journal.jsonl"}[damage]
    path = copy_run / name
    lines = readable_bytes(path).decode("utf-8").splitlines()
    if damage == "no-start":
        lines = lines[1:]
    elif damage == "run.json":
        lines = ['{"format_version": 1, "run_id": 3}']
    else:
        lines[1] = lines[1][: len(lines[1]) // 2]  # a torn line mid-file: real damage
    text = ("\n".join(lines) + "\n").encode("utf-8")
    path.write_bytes(gzip.compress(text) if path.suffix == ".gz" else text)
    with pytest.raises(JournalError):
        load_report(copy_run)
    out = tmp_path / "out.html"
    assert main(["report", str(copy_run), "--html", str(out)]) == 2
    assert name in one_error_line(capsys)
    assert not out.exists()


# -- a real browser --------------------------------------------------------------------------

def chromium() -> str:
    """Debian's chromium; CI installs it (``.ci/run``), so there its absence fails."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail("CI is set but chromium is not installed; .ci/run installs it")
    pytest.skip("chromium is not installed (apt-get install chromium); CI runs this test")


#: The window of every headless run: tall enough for every chart of the test runs' pages.
WINDOW = (1280, 3000)


def headless(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--window-size={WINDOW[0]},{WINDOW[1]}"]
    return subprocess.run([exe, *flags, *args], capture_output=True, text=True, timeout=120,
                          check=False)


def decode_png(data: bytes) -> np.ndarray:
    """8-bit RGB or RGBA, non-interlaced PNG (what chromium writes) as an (h, w, c) array.

    Standard library and numpy only: None, Sub and Up rows are unfiltered with
    numpy; Average and Paeth depend on the pixel to the left, so they loop."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int64)
    for y in range(height):
        start = y * (stride + 1)
        kind_byte = raw[start]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=start + 1).astype(np.int64)
        if kind_byte == 0:
            cur = line
        elif kind_byte == 1:
            cur = np.cumsum(line.reshape(width, channels), axis=0).reshape(-1) & 255
        elif kind_byte == 2:
            cur = (line + prev) & 255
        else:
            row, above = line.tolist(), prev.tolist()
            done = [0] * stride
            for x in range(stride):
                a = done[x - channels] if x >= channels else 0
                b = above[x]
                if kind_byte == 3:
                    pred = (a + b) >> 1
                else:
                    c = above[x - channels] if x >= channels else 0
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                done[x] = (row[x] + pred) & 255
            cur = np.array(done, dtype=np.int64)
        out[y] = cur
        prev = cur
    return out.reshape(height, width, channels)


def near(pixels: np.ndarray, color: str, tolerance: int = 6) -> int:
    """How many pixels are within ``tolerance`` of ``#rrggbb`` on every channel."""
    rgb = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int64)
    return int(np.all(np.abs(pixels[..., :3].astype(np.int64) - rgb) <= tolerance,
                      axis=-1).sum())


def test_the_page_loads_in_chromium_without_console_output_and_its_charts_render(
        journals: Path, tmp_path: Path) -> None:
    exe = chromium()
    page = tmp_path / "report.html"
    assert main(["report", "r1", "--journals", str(journals), "--html", str(page)]) == 0
    url = page.resolve().as_uri()

    # 1. The page's own check: every chart laid out with content, no uncaught error.
    dom = headless(exe, tmp_path / "profile-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-render="ok"' in dom.stdout, re.findall(r'data-render="[^"]*"', dom.stdout)
    assert f'data-charts="{len(CHART_IDS)}"' in dom.stdout
    boxes_attr = re.search(r'data-boxes="([^"]*)"', dom.stdout)
    assert boxes_attr is not None
    boxes = {name: tuple(int(v) for v in rest)
             for name, *rest in (b.split(",") for b in boxes_attr.group(1).split(";"))}
    assert set(boxes) == set(CHART_IDS)

    # 2. A screenshot, with the console logged: the page writes nothing there, so any
    #    line (an uncaught error, a blocked load, a CSP violation) is a failure.
    shot = tmp_path / "shot.png"
    run = headless(exe, tmp_path / "profile-shot", "--enable-logging=stderr", "--v=0",
                   f"--screenshot={shot}", url)
    assert run.returncode == 0, run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    pixels = decode_png(shot.read_bytes())
    assert pixels.shape[:2] == (WINDOW[1], WINDOW[0])
    rgb = pixels[..., :3]
    assert np.any(rgb < 240, axis=-1).mean() > 0.05  # not a blank page
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 100

    # 3. Each chart's box (same window, same layout) holds drawing in its own colors.
    expected = {"chart-test": ["promoted"], "chart-scores": ["dev", "val"],
                "chart-forest": ["promoted", "rejected"], "chart-budget": ["budget"]}
    for chart, colors in expected.items():
        x, y, w, h = boxes[chart]
        assert y + h <= WINDOW[1], f"{chart} is below the screenshot"
        crop = pixels[y:y + h, x:x + w]
        assert np.any(crop[..., :3] < 240, axis=-1).mean() > 0.02, chart
        for color in colors:
            assert near(crop, COLORS[color]) >= 40, (chart, color)


def test_write_html_replaces_an_older_report(journals: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    out.write_text("old", encoding="utf-8")
    assert write_html(journals / "r1", out) == out
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


# -- the whole truth in text: tolerances start -> final, refusals with their reasons -------

TRAPS = """
def run(config, task, ctx):
    record(config, task, ctx)
    dev = task.id.startswith("dev")
    p = 0.5 + (0.3 if config["boost"] else 0.0)
    if config["knob"] == 3:  # a dev-only gain: val must refuse it
        p += 0.4 if dev else -0.05
    if config["knob"] == 1:  # a real gain at three times the cost: the tolerance refuses it
        p += 0.3
    ok = random.Random(ctx.seed).random() < min(p, 0.95)
    cost = (1.1 if config["boost"] else 1.0) * (3.0 if config["knob"] == 1 else 1.0)
    return {"output": task.expected if ok else "wrong", "cost": cost}
"""


@pytest.fixture(scope="module")
def traps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run ``r2`` (under a second) refused in every way a printout must tell
    apart: by val at confirmation, by the cost tolerance at screening, by futility at
    screening, held back by the memory; and ``boost`` promoted."""
    root = tmp_path_factory.mktemp("traps")
    bench = write_search_bench(root / "bench", TRAPS, tasks=search_tasks(24, 20, 20),
                               metrics=METRICS)
    launch_search(bench, run_id="r2", journals=root / "journals")
    return root / "journals" / "r2"


def decision_rows(page: str) -> list[list[str]]:
    """The decisions table's rows as lists of cell texts (tags stripped, unescaped)."""
    table = re.search(r'<table id="decisions-table">(.*?)</table>', page, re.S)
    assert table is not None
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), re.S)[1:]
    # A list item or a <small> is a line of its own; other tags run with their text.
    return [[" ".join(html.unescape(re.sub(r"<[^>]+>", "", re.sub(
        r"</li>|<small>", " ", cell))).split())
             for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]


def test_every_decision_says_where_it_was_decided_which_gate_refused_it_and_why(
        traps: Path) -> None:
    decisions = [r for r in records(traps) if r["kind"] == "candidate"]
    rows = decision_rows(render_html(traps))
    assert len(rows) == len(decisions)
    stages = {}
    for row, d in zip(rows, decisions, strict=True):
        step, _, verdict, stage, gate, why, unscored = row
        # This harness fails nowhere: each decision says so, for both configs.
        assert unscored == "—" or re.fullmatch(
            r"0 of [\d,]+ incumbent, same seeds: 0 of [\d,]+", unscored), unscored
        assert (step, verdict) == (str(d["step"]), d["verdict"])
        failing = [g for g in d["gates"] if not g["passed"]]
        assert gate == (failing[0]["name"] if failing else "—")
        for g in failing:
            assert " ".join(f"{g['name']}: {g['reason']}".split()) in why
        if d.get("why"):
            assert " ".join(d["why"].split()) in why
        stages[(d["verdict"], gate, (d["dev"] or {}).get("screen", {}).get("status"))] = stage
    # Each kind of refusal reads differently, in words, not only in a tooltip.
    assert stages[("rejected", "val", "pass")] == "refused at confirmation"
    assert stages[("rejected", "aux:cost", "aux")] == "dropped at screening: past a tolerance"
    assert stages[("rejected", "dev", "futile")] == "dropped at screening: futility"
    assert stages[("rejected", "—", "held")] == "held back by the memory of an earlier refusal"
    assert stages[("promoted", "—", "pass")] == "confirmed: every gate passed"


def tolerance_rows(page: str) -> list[list[str]]:
    table = re.search(r'<table id="tolerance-table">(.*?)</table>', page, re.S)
    assert table is not None
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)[1:]
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell))
             for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]


def test_the_test_section_shows_each_tolerance_from_start_to_final(journals: Path) -> None:
    test = next(r for r in records(journals / "r1") if r["kind"] == "test")
    assert [a["details"]["status"] for a in test["aux"]] == ["within", "within"]
    rows = tolerance_rows(render_html(journals / "r1"))
    assert rows == [["cost", "within", test["aux"][0]["reason"], "20"],
                    ["unscored", "within", test["aux"][1]["reason"], "20"]]
    assert "allowed +25.0%" in rows[0][2] and "upper bound of regression" in rows[0][2]


@pytest.mark.parametrize(("status", "word", "tone"), [("beyond", "BEYOND", "bad"),
                                                      ("unclear", "unclear", "warn")])
def test_a_better_test_score_never_reads_green_over_a_tolerance_not_shown(
        copy_run: Path, status: str, word: str, tone: str) -> None:
    lines = (copy_run / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    n, record = next((n, r) for n, r in enumerate(map(json.loads, lines)) if r["kind"] == "test")
    record["aux"][0]["details"]["status"] = status
    record["aux"][0]["passed"] = status != "beyond"
    record["aux"][0]["reason"] = f"cost +30.0% (upper bound of regression +41.0%, allowed " \
                                 f"+25.0%): {status}"
    lines[n] = json.dumps(record)
    (copy_run / "journal.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = render_html(copy_run)
    assert tolerance_rows(page)[0][:3] == ["cost", word, record["aux"][0]["reason"]]
    headline = re.search(r'<p class="headline (\w*)" id="test-result">(.*?)</p>', page)
    assert headline is not None and headline.group(1) == tone
    assert f"1 auxiliary tolerance(s) {word}" in html.unescape(headline.group(2))


def test_a_version_1_check_without_a_status_reads_as_passed_or_beyond(copy_run: Path) -> None:
    lines = (copy_run / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    n, record = next((n, r) for n, r in enumerate(map(json.loads, lines)) if r["kind"] == "test")
    record["aux"][0]["details"] = {}
    record["aux"][0]["passed"] = False
    lines[n] = json.dumps(record)
    (copy_run / "journal.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert tolerance_rows(render_html(copy_run))[0][1] == "BEYOND"


# Appended to a copy of the page: the text a reader sees once every chart is gone.
# innerText leaves out what is not rendered (the <title>, display:none, closed
# <details>), and removing the SVGs first leaves out every tooltip and chart label.
VISIBLE_TEXT_PROBE = """<script>
document.querySelectorAll("svg").forEach(function (svg) { svg.remove(); });
document.documentElement.setAttribute("data-visible-text", document.body.innerText);
</script></body>"""


def probed_report(run: Path, tmp_path: Path, probe: str) -> Path:
    """``forge report`` of ``run`` (``tmp_path/report.html``), and a copy of the page with
    ``probe`` (a script, then ``</body>``) in place of its end: the copy's path."""
    page = tmp_path / "report.html"
    assert main(["report", str(run), "--html", str(page)]) == 0
    probed = tmp_path / "probed.html"
    text = page.read_text(encoding="utf-8")
    assert text.count("</body>") == 1
    probed.write_text(text.replace("</body>", probe), encoding="utf-8")
    return probed


def test_chromium_shows_the_tolerance_check_and_each_refusal_as_visible_text(
        traps: Path, tmp_path: Path) -> None:
    exe = chromium()
    probed = probed_report(traps, tmp_path, VISIBLE_TEXT_PROBE)
    dom = headless(exe, tmp_path / "profile-text", "--dump-dom", probed.resolve().as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'data-visible-text="([^"]*)"', dom.stdout)
    assert found is not None, dom.stdout[:2000]
    visible = " ".join(html.unescape(found.group(1)).split())
    recs = records(traps)
    test = next(r for r in recs if r["kind"] == "test")
    for check in test["aux"]:
        assert f"{check['name'][4:]} {check['details']['status']} {check['reason']}" in visible
    refusals = [(g["name"], g["reason"]) for r in recs if r["kind"] == "candidate"
                for g in r["gates"] if not g["passed"]]
    assert {name for name, _ in refusals} >= {"val", "aux:cost", "dev"}
    for name, reason in refusals:
        assert f"{name}: {' '.join(reason.split())}" in visible, name
    for stage in ("refused at confirmation", "dropped at screening: past a tolerance",
                  "dropped at screening: futility"):
        assert stage in visible
