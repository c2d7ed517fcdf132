"""The report's unscored attempts and its viewer of what the agent did, on a run whose
harness fails as real agents do (``PARTLY_FAILING``: some tasks never score, ``knob`` 1
raises on a third of its attempts, wrong answers and messages hold markup).

The page's counts are checked against the attempt store's lines; the viewer's tasks,
their "changed" flags and their side-by-side answers against the store too; harness
text must be text on the page (escaped, redacted); and a real headless browser
(Debian's ``chromium``) must filter the viewer to the tasks that changed and back.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import PARTLY_FAILING, stored_rows, write_search_bench
from test_html import chromium, headless, probed_report

from forge.journal.review import load_run_records
from forge.journal.store import store_bytes
from forge.report.html import load_report, render_html
from forge.report.html._viewer import SAMPLE
from forge.search.launch import launch_search
from forge.secrets.masking import MASK, clear_secrets, register_secret

NEVER_SCORED = [f"test-{i:02d}" for i in range(30) if i % 10 in (3, 7)]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished PARTLY_FAILING run ``r3`` (about a second)."""
    root = tmp_path_factory.mktemp("failing")
    bench = write_search_bench(root / "bench", PARTLY_FAILING)
    launch_search(bench, run_id="r3", journals=root / "journals", seed=5)
    return root / "journals" / "r3"


def table(page: str, table_id: str) -> str:
    found = re.search(rf'<table[^>]* id="{table_id}">(.*?)</table>', page, re.S)
    assert found is not None, table_id
    return found.group(1)


def cells(row: str) -> list[str]:
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split())
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def outcomes(folder: Path, stream: str, k: int) -> dict[str, dict[str, list[str]]]:
    """config -> task -> the outcome of each of its first k attempts on ``stream``, from
    the store's lines: passed, failed or unscored."""
    out: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for row in stored_rows(folder):
        r = row["result"]
        if row["stream"] != stream or r["attempt"] >= k:
            continue
        scored = r["stop_reason"] == "completed" and r["score"] is not None
        out[row["config"]][r["task_id"]].append(
            "unscored" if not scored else "passed" if r["score"]["passed"] else "failed")
    return out


# -- unscored attempts: a column, a table of reasons, the test split --------------------------

def test_the_failures_table_gives_each_configs_share_and_reasons_with_an_example(
        run: Path) -> None:
    page = render_html(run)
    rows = stored_rows(run)
    start = load_run_records(run).start
    assert start is not None
    mine = [r["result"] for r in rows if r["config"] == start.fingerprint]
    unscored = sum(r["stop_reason"] != "completed" for r in mine)
    failures = table(page, "failures-table")
    first = cells(re.findall(r"<tr>(.*?)</tr>", failures, re.S)[1])
    name, share, reason, count, example = first
    assert name.startswith("start config")
    assert share.startswith(f"{unscored:,} of {len(mine):,} ({unscored / len(mine):.1%})")
    assert reason == ("error: ValueError: unparseable JSON from the model on <task>: "
                      "<script>x</script>")
    assert count == f"{unscored:,}"  # the start fails for this reason alone
    assert re.fullmatch(r"task (dev|val|test)-\d\d attempt \d+: ValueError: unparseable JSON "
                        r"from the model on \S+: <script>x</script>", example), example
    # knob 1's own reason is charged to knob 1 alone.
    assert failures.count("RuntimeError: tool call limit hit on &lt;task&gt;") == 1
    # Harness text is text: the markup in its messages never reaches the page's markup.
    assert "<script>x" not in page and "&lt;script&gt;x&lt;/script&gt;" in failures


def test_each_decision_shows_its_unscored_share_beside_the_incumbents(run: Path) -> None:
    page = render_html(run)
    decisions = [r for r in load_run_records(run).candidates]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table(page, "decisions-table"), re.S)[1:]
    assert len(rows) == len(decisions)
    worse = 0
    for row, d in zip(rows, decisions, strict=True):
        unscored = cells(row)[-1]
        if d.candidate is None:
            assert unscored == "—"
            continue
        found = re.fullmatch(r"([\d,]+) of ([\d,]+).* incumbent, same seeds: ([\d,]+) of "
                             r"([\d,]+).*", unscored)
        assert found is not None, unscored
        cand, n, inc, m = (int(g.replace(",", "")) for g in found.groups())
        assert n == m > 0
        if (d.move.target, d.move.after) == ("knob", 1):
            assert cand > inc and 'class="num unscored fail"' in row
            worse += 1
        else:
            assert cand == inc  # the tasks every config fails, and nothing more
    assert worse >= 1


def test_the_test_section_names_the_tasks_its_comparison_left_out(run: Path) -> None:
    page = render_html(run)
    headline = re.search(r'id="test-result">(.*?)</p>', page, re.S)
    assert headline is not None and "24 of 30 tasks × 20 attempts" in headline.group(1)
    left = re.search(r'id="test-unscored-1">(.*?)</p>', page, re.S)
    assert left is not None
    named = "6 (test-03, test-07, test-13, test-17, test-23 and 1 more)"
    assert html.unescape(left.group(1)) == (
        f"6 test tasks left out of the comparison, with no scored attempt: start {named}; "
        f"final {named}")


# -- the viewer --------------------------------------------------------------------------------

def viewer_tasks(page: str, stream: str) -> list[tuple[str, bool, list[list[str]]]]:
    """(task id, changed, the attempt rows' cells) per task of the stream's table."""
    out = []
    for flag, body in re.findall(r'<tbody class="viewer-task" data-changed="(\d)">(.*?)'
                                 r"</tbody>", table(page, f"viewer-{stream}"), re.S):
        head, *attempts = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
        task = re.search(r"<code>(.*?)</code>", head)
        assert task is not None
        out.append((html.unescape(task.group(1)), flag == "1", [cells(a) for a in attempts]))
    return out


def test_the_viewer_sets_each_tasks_answers_side_by_side_and_flags_the_changed(
        run: Path) -> None:
    page = render_html(run)
    report = load_report(run)
    start, final = report.start.fingerprint, report.final_fingerprint
    assert start != final  # boost was promoted: two configs to compare
    test = outcomes(run, "test", 20)
    shown = viewer_tasks(page, "test")
    assert sorted(t for t, _, _ in shown) == sorted(test[start])  # every test task
    changed = 0
    for task, flag, attempts in shown:
        a, b = test[start][task], test[final][task]
        assert flag == (pass_rate(a) != pass_rate(b) or a.count("unscored") != b.count(
            "unscored"))
        changed += flag
        assert 1 <= len(attempts) <= SAMPLE
        for row in attempts:
            index, left, right = row  # the attempt, then the two answers side by side
            i = int(index.removeprefix("attempt "))
            assert left.startswith(test[start][task][i]) and right.startswith(test[final][task][i])
        if task in NEVER_SCORED:
            assert not flag and all(r[1].startswith("unscored: error: ValueError")
                                    for r in attempts)
    # The changed tasks come first, and the count says how many.
    flags = [flag for _, flag, _ in shown]
    assert flags == sorted(flags, reverse=True) and 0 < changed < len(shown)
    assert f"({changed_all(page)} changed)" in page  # over every split shown
    # A wrong answer's markup is shown, never applied.
    assert "<img" not in page and "&lt;img src=x onerror=alert(2)&gt; not test-" in page


def pass_rate(outcomes: list[str]) -> float | None:
    scored = len(outcomes) - outcomes.count("unscored")
    return outcomes.count("passed") / scored if scored else None


def changed_all(page: str) -> int:
    return len(re.findall(r'<tbody class="viewer-task" data-changed="1">', page))


def test_the_viewer_shows_redacted_answers_cut_to_a_bound(run: Path, tmp_path: Path) -> None:
    folder = Path(shutil.copytree(run, tmp_path / "r3"))
    secret = "sk-test-" + "a1b2c3d4e5f6" * 3
    rows = stored_rows(folder)
    report = load_report(folder)
    for row in rows:  # the final config's answers now leak a key, and run long
        result = row["result"]
        if row["config"] == report.final_fingerprint and result["output"] is not None:
            result["output"]["output"] = f"the key is {secret} " + "x" * 5000
    lines = [json.dumps(row) for row in rows]
    (folder / "attempts.jsonl.gz").write_bytes(store_bytes(lines))
    clear_secrets()
    try:
        assert register_secret(secret)
        page = render_html(folder)
    finally:
        clear_secrets()
    assert secret not in page and secret[:12] not in page
    assert f"the key is {MASK}" in page
    longest = max(len(html.unescape(p)) for p in re.findall(r"<pre>(.*?)</pre>", page, re.S))
    assert 600 <= longest < 700  # cut, with its mark


# -- a real browser ----------------------------------------------------------------------------

#: Appended to a copy of the page: counts the viewer's tasks shown, ticks the filter,
#: counts again, unticks it, and records what the answers' text and markup are.
VIEWER_PROBE = """<script>
(function () {
  var tasks = document.querySelectorAll("tbody.viewer-task");
  function shown() {
    return Array.prototype.filter.call(tasks, function (t) {
      return t.getClientRects().length > 0; }).length;
  }
  var box = document.getElementById("viewer-changed"), out = [];
  out.push(tasks.length, shown());
  box.click();
  out.push(shown(), document.getElementById("viewer-count").textContent);
  box.click();
  out.push(shown());
  var pairs = document.querySelectorAll("tbody.viewer-task tr.attempt");
  var sided = Array.prototype.every.call(pairs, function (tr) {
    return tr.querySelectorAll("td.answer").length === 2; });
  var wrong = document.querySelector("td.answer.failed pre");
  out.push(pairs.length, sided, document.querySelectorAll("img").length,
           document.querySelectorAll("script").length, wrong ? wrong.textContent : "");
  document.documentElement.setAttribute("data-viewer", JSON.stringify(out));
})();
</script></body>"""


def test_chromium_filters_the_viewer_to_the_changed_tasks_and_back(
        run: Path, tmp_path: Path) -> None:
    exe = chromium()
    probed = probed_report(run, tmp_path, VIEWER_PROBE)
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    dom = headless(exe, tmp_path / "profile-viewer", "--enable-logging=stderr", "--v=0",
                   "--dump-dom", probed.resolve().as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert [line for line in dom.stderr.splitlines() if ":CONSOLE" in line] == []
    assert 'data-render="ok"' in dom.stdout
    found = re.search(r'data-viewer="([^"]*)"', dom.stdout)
    assert found is not None, dom.stdout[:2000]
    values: list[Any] = json.loads(html.unescape(found.group(1)))
    total, before, filtered, count, after, pairs, sided, images, scripts, wrong = values
    changed = changed_all(text)
    assert before == after == total == len(re.findall(r'class="viewer-task"', text))
    assert 0 < filtered == changed < total
    assert count == f"{changed} of {total} tasks shown"
    assert pairs > 0 and sided is True  # every sampled attempt: the two answers, side by side
    # What the harness wrote is text: no element came of it, its markup reads as written.
    assert images == 0 and scripts == 3  # the page's two and the probe
    assert wrong.startswith("<img src=x onerror=alert(2)> not ")
