"""Shared fixtures: the example ``arith`` bench and a factory for small throwaway benches.

``make_bench`` writes a complete bench (bench.yaml, registry.yaml, harness.py and
three split files) into the test's ``tmp_path``, so a test can give forge a harness
that hangs, raises or returns garbage and watch what forge does with it.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from forge.bench.loader import Bench, load_bench
from forge.evaluation.evaluate import evaluate
from forge.results.model import EvalResult

ROOT = Path(__file__).resolve().parent
ARITH = ROOT / "benches" / "arith"
#: The checkout these tests run from.
REPO = ROOT.parent

#: The registry every ``make_bench`` bench uses.
MINI_REGISTRY = """\
name: mini
settings:
  effort: {type: int, min: 1, max: 5, default: 1, description: "how hard to try"}
  mode:   {type: enum, choices: [fast, careful], default: fast}
"""

#: A harness that answers every task correctly (for the ``exact`` scorer).
ECHO_HARNESS = """
def run(config, task, ctx):
    return {"output": task.expected}
"""

#: A CPU-bound sync harness: about 1.2 s in one C call (``sum`` over a range never lets
#: go of the GIL), so no other thread of its process runs meanwhile: a monitor thread
#: cannot time it out, only see, afterwards, that it overran.
CPU_BOUND_HARNESS = """
import time

def _seconds(n):
    t0 = time.perf_counter()
    sum(range(n))
    return time.perf_counter() - t0

_N = int(1.2 * 1_000_000 / min(_seconds(1_000_000) for _ in range(3)))

def run(config, task, ctx):
    sum(range(_N))
    return {"output": task.expected}
"""


def default_tasks() -> dict[str, list[dict[str, Any]]]:
    """Three dev tasks, one val and one test; inputs distinct across splits."""
    def task(split: str, i: int) -> dict[str, Any]:
        return {"id": f"{split}-{i}", "input": {"q": f"{split} question {i}"},
                "expected": f"{split} answer {i}"}

    return {"dev": [task("dev", i) for i in range(3)], "val": [task("val", 0)],
            "test": [task("test", 0)]}


def copy_forge_source(dest: Path) -> Path:
    """A copy of this forge's source tree at ``dest`` (the package, pyproject.toml,
    README.md, LICENSE): what pip builds, without a build/ folder left in the checkout."""
    shutil.copytree(REPO / "forge", dest / "forge", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, dest / name)
    return dest


def offline_venv(folder: Path) -> dict[str, str]:
    """A new virtualenv at ``folder`` with nothing installed in it, and the environment
    of a process that runs it first on PATH, as a fresh CI runner would, but offline:
    forge's dependencies, pip and setuptools come from this interpreter's site-packages
    on PYTHONPATH (read as a plain folder, so an editable forge there is not imported),
    pip uses no index, and builds without isolation (its env variable's "0" turns
    isolation *off*), so nothing is downloaded."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # A fresh runner has no virtualenv of ours on PATH: the tests' own, if activated,
    # would put a forge there before the install step.
    ours = {str(Path(p) / "bin") for p in (sys.prefix, os.environ.get("VIRTUAL_ENV"))
            if p and Path(p) != Path(sys.base_prefix)}
    outside = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p not in ours)
    env.update(PATH=f"{folder / 'bin'}{os.pathsep}{outside}",
               PYTHONPATH=sysconfig.get_paths()["purelib"], PIP_NO_INDEX="1",
               PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONDONTWRITEBYTECODE="1")
    return env


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(dict(r)) + "\n" for r in rows), encoding="utf-8")


class MakeBench(Protocol):
    def __call__(self, harness_source: str = ..., *,
                 tasks: Mapping[str, Sequence[Mapping[str, Any]]] | None = ...,
                 scorer: str = ..., rollouts: Mapping[str, Any] | None = ...,
                 folder: str = ..., name: str = ...) -> Path: ...


def write_bench(root: Path, harness_source: str = ECHO_HARNESS, *,
                tasks: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                scorer: str = "exact", rollouts: Mapping[str, Any] | None = None,
                name: str = "mini") -> Path:
    """Write a complete bench into ``root``; returns the bench file.

    ``scorer`` is written verbatim as the YAML value of ``scorer:``. The bench file
    has one field per line, in the order name, harness, registry, splits (one line),
    rollouts, scorer, so tests can point at a line.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "registry.yaml").write_text(MINI_REGISTRY, encoding="utf-8")
    (root / "harness.py").write_text(textwrap.dedent(harness_source), encoding="utf-8")
    splits = default_tasks() if tasks is None else tasks
    for split, rows in splits.items():
        write_jsonl(root / "tasks" / f"{split}.jsonl", rows)
    settings = {"k": 2, "concurrency": 4, "timeout_s": 5.0, **(rollouts or {})}
    split_map = ", ".join(f"{s}: tasks/{s}.jsonl" for s in splits)
    bench = root / "bench.yaml"
    bench.write_text(
        f"name: {name}\n"
        'harness: {python: "harness:run"}\n'
        "registry: registry.yaml\n"
        f"splits: {{{split_map}}}\n"
        f"rollouts: {json.dumps(settings)}\n"
        f"scorer: {scorer}\n",
        encoding="utf-8",
    )
    return bench


def with_async_judge(bench: Path, sleep_s: float = 0.0) -> Path:
    """``bench`` (a ``make_bench`` bench with ``scorer: {code: "judge:grade"}``) with that
    async scorer written: it sleeps ``sleep_s``, then checks the answer."""
    (bench.parent / "judge.py").write_text(
        f"import asyncio\n\nasync def grade(task, output):\n    await asyncio.sleep({sleep_s})\n"
        "    return output.output == task.expected\n", encoding="utf-8")
    return bench


def dumps_key_twice(value: Any, at: Sequence[str | int], key: str, again: Any) -> str:
    """``value`` as one line of JSON in which the object at key path ``at`` also holds
    ``key`` written a second time, with the value ``again``, after its own keys."""
    def dump(item: Any, loc: tuple[str | int, ...]) -> str:
        if isinstance(item, dict):
            pairs = [f"{json.dumps(k)}: {dump(v, (*loc, k))}" for k, v in item.items()]
            if list(loc) == list(at):
                pairs.append(f"{json.dumps(key)}: {json.dumps(again)}")
            return "{" + ", ".join(pairs) + "}"
        if isinstance(item, list):
            return "[" + ", ".join(dump(v, (*loc, i)) for i, v in enumerate(item)) + "]"
        return json.dumps(item)

    return dump(value, ())


def objects_in(value: Any, loc: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...],
                                                                          dict[str, Any]]]:
    """Every non-empty JSON object within ``value`` (itself included) with its key path."""
    found: list[tuple[tuple[str | int, ...], dict[str, Any]]] = []
    if isinstance(value, dict):
        if value:
            found.append((loc, value))
        for k, v in value.items():
            found += objects_in(v, (*loc, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += objects_in(v, (*loc, i))
    return found


def readable_bytes(path: Path) -> bytes:
    """What a person reading ``path`` sees: a gzip file decompressed (so a search for a
    secret in it looks at the text, not at deflated bytes that never show it)."""
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def stored_text(folder: Path) -> str:
    """A run folder's attempt store as text, either format (see :func:`stored_rows`)."""
    compressed = folder / "attempts.jsonl.gz"
    return readable_bytes(compressed if compressed.exists()
                          else folder / "attempts.jsonl").decode("utf-8")


def stored_rows(folder: Path) -> list[dict[str, Any]]:
    """The attempts of a run folder's attempt store as its lines say them (either format,
    read the way ``zcat`` reads the compressed one: every member, the header left out)."""
    rows = [json.loads(line) for line in stored_text(folder).splitlines()]
    return [r for r in rows if r.get("kind") != "attempt_store"]


def line_of(path: Path, startswith: str) -> int:
    """1-based number of the first line of ``path`` that starts with ``startswith``."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith(startswith):
            return number
    raise AssertionError(f"no line starting with {startswith!r} in {path}")


@pytest.fixture
def make_bench(tmp_path: Path) -> MakeBench:
    """``make_bench(harness_source, tasks=..., scorer=..., rollouts=..., folder=...)``."""

    def make(harness_source: str = ECHO_HARNESS, *,
             tasks: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
             scorer: str = "exact", rollouts: Mapping[str, Any] | None = None,
             folder: str = "bench", name: str = "mini") -> Path:
        return write_bench(tmp_path / folder, harness_source, tasks=tasks, scorer=scorer,
                           rollouts=rollouts, name=name)

    return make


@pytest.fixture(scope="session")
def arith_bench_path() -> Path:
    return ARITH


@pytest.fixture
def arith_bench(arith_bench_path: Path) -> Bench:
    # Loaded per test: other tests load benches with their own ``harness`` module.
    return load_bench(arith_bench_path)


@pytest.fixture
def arith_result(arith_bench: Bench) -> EvalResult:
    """The arith bench's default config on dev, k=2 (a few hundredths of a second)."""
    return evaluate(arith_bench, arith_bench.defaults, k=2)


# -- search benches ----------------------------------------------------------------------

#: The registry of ``make_search_bench`` benches: ``boost`` is the setting the test's
#: harness makes matter; ``knob`` is a distractor unless the harness reads it.
SEARCH_REGISTRY = """\
name: s
settings:
  boost: {type: bool, default: false}
  knob:  {type: int, min: 1, max: 3, step: 1, default: 2}
"""

#: Two bool settings, ``small`` and ``big``, for harnesses where one move is worth more
#: than the other (which candidate a step confirms, and when).
TWO_REGISTRY = """\
name: two
settings:
  small: {type: bool, default: false}
  big:   {type: bool, default: false}
"""

#: Put at the top of a search-bench harness: ``record(config, task, ctx)`` appends one
#: JSON line per harness call to ``calls.log`` beside the harness (thread-safe), so a
#: test can count calls and see their order.
CALL_LOG_PRELUDE = """\
import json as _json
import random
import threading as _threading
import time
from pathlib import Path as _Path

_LOG = _Path(__file__).with_name("calls.log")
_LOCK = _threading.Lock()


def record(config, task, ctx):
    line = _json.dumps({"split": ctx.split, "task": task.id, "attempt": ctx.attempt,
                        "seed": ctx.seed, "config": config}, sort_keys=True)
    with _LOCK, _LOG.open("a", encoding="utf-8") as fh:
        fh.write(line + "\\n")
"""


#: A search bench harness: ``boost`` wins on pass rate (0.5 -> 0.8) and costs 10% more.
#: A search bench harness where no setting matters: each attempt a fair coin on its seed.
def two_sizes_harness(base: float, small: float, big: float) -> str:
    """A harness for TWO_REGISTRY's bench: success with chance ``base`` plus ``small``
    and ``big`` where those settings are on."""
    return f"""
def run(config, task, ctx):
    record(config, task, ctx)
    p = {base} + {small} * config["small"] + {big} * config["big"]
    ok = random.Random(ctx.seed).random() < p
    return {{"output": task.expected if ok else "wrong"}}
"""


#: Both moves of TWO_REGISTRY are gains; ``big`` three times ``small``'s.
TWO_SIZES = two_sizes_harness(0.2, 0.15, 0.45)

COIN_HARNESS = """
def run(config, task, ctx):
    record(config, task, ctx)
    ok = random.Random(ctx.seed).random() < 0.5
    return {"output": task.expected if ok else "wrong"}
"""

COSTLY_BOOST = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong",
            "cost": 1.1 if config["boost"] else 1.0}
"""


#: A search bench harness that fails as real agents do. ``boost`` is a real gain (0.5 ->
#: 0.8) that fails no more than the start; the tasks numbered 3 and 7 of every split never
#: score, whatever the config (the model's answer cannot be parsed); ``knob`` 1 raises on
#: about a third of the attempts (a tool-call limit). Tasks numbered 0, 4, 8 are passed by
#: every config. Messages and wrong answers hold markup, for the escaping.
PARTLY_FAILING = """
def run(config, task, ctx):
    record(config, task, ctx)
    n = int(task.id.rsplit("-", 1)[1])
    rng = random.Random(ctx.seed)
    if n % 10 in (3, 7):
        raise ValueError(f"unparseable JSON from the model on {task.id}: <script>x</script>")
    if config["knob"] == 1 and rng.random() < 0.3:
        raise RuntimeError(f"tool call limit hit on {task.id}")
    if n % 4 == 0:
        return {"output": task.expected}
    ok = rng.random() < (0.8 if config["boost"] else 0.5)
    return {"output": task.expected if ok else f"<img src=x onerror=alert(2)> not {task.id}"}
"""


def search_tasks(n_dev: int = 40, n_val: int = 30, n_test: int = 30, *,
                 critical: int = 0) -> dict[str, list[dict[str, Any]]]:
    """Tasks for a search bench; the first ``critical`` dev and val tasks are tagged
    ``critical``."""
    def task(split: str, i: int, tags: list[str]) -> dict[str, Any]:
        return {"id": f"{split}-{i:02d}", "input": {"q": f"{split} question {i}"},
                "expected": f"{split} answer {i}", "tags": tags}

    return {split: [task(split, i, ["critical"] if split != "test" and i < critical else [])
                     for i in range(n)]
            for split, n in (("dev", n_dev), ("val", n_val), ("test", n_test))}


def write_search_bench(root: Path, harness_body: str, *, registry: str = SEARCH_REGISTRY,
                       tasks: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                       k: int = 4, metrics: Mapping[str, Any] | None = None,
                       gates: Mapping[str, Any] | None = None,
                       search: Mapping[str, Any] | None = None, name: str = "s") -> Path:
    """A bench for whole searches: ``CALL_LOG_PRELUDE`` + ``harness_body`` as the harness
    (which should define ``run`` and call ``record``), the exact scorer, and the given
    metrics, gates and search settings; returns the bench file."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "registry.yaml").write_text(registry, encoding="utf-8")
    (root / "harness.py").write_text(CALL_LOG_PRELUDE + textwrap.dedent(harness_body),
                                     encoding="utf-8")
    splits = search_tasks() if tasks is None else tasks
    for split, rows in splits.items():
        write_jsonl(root / "tasks" / f"{split}.jsonl", rows)
    split_map = ", ".join(f"{s}: tasks/{s}.jsonl" for s in splits)
    search_settings = {"max_steps": 10, "patience": 3, **(search or {})}
    gate_settings = {"alpha": 0.05, "min_effect": 0.0, "val_margin": 0.02, **(gates or {})}
    bench = root / "bench.yaml"
    bench.write_text(
        f"name: {name}\n"
        'harness: {python: "harness:run"}\n'
        "registry: registry.yaml\n"
        f"splits: {{{split_map}}}\n"
        f"rollouts: {json.dumps({'k': k, 'concurrency': 4, 'timeout_s': 10.0})}\n"
        "scorer: exact\n"
        f"metrics: {json.dumps(dict(metrics or {}))}\n"
        f"gates: {json.dumps(gate_settings)}\n"
        f"search: {json.dumps(search_settings)}\n",
        encoding="utf-8",
    )
    return bench


#: What differs between two runs of the same search: when, how long, the run's id,
#: where its attempts ran.
RUN_VOLATILE = frozenset({"at", "elapsed_s", "run_id", "executor", "options"})


def journal_records(folder: Path) -> list[dict[str, Any]]:
    """The records of a run folder's journal, in order."""
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


def stable_records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Journal records without what differs between runs of the same search."""
    return [{k: v for k, v in r.items() if k not in RUN_VOLATILE} for r in rows]


def stored_results(folder: Path) -> list[dict[str, Any]]:
    """The attempt results a run folder's store holds, in order."""
    return [row["result"] for row in stored_rows(folder)]


def read_calls(bench_file: Path) -> list[dict[str, Any]]:
    """The harness calls a search bench logged, in order."""
    log = bench_file.parent / "calls.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def run_forge(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """Run ``forge ARGS`` in-process; returns (exit code, stdout, stderr)."""
    from forge.cli import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def run_forge_json(capsys: pytest.CaptureFixture[str], *args: object) -> Any:
    """``forge ARGS`` that must succeed and print one JSON document on stdout."""
    code, out, err = run_forge(capsys, *args)
    assert code == 0, err
    return json.loads(out)


def assert_user_error(code: int, out: str, err: str, *fragments: str) -> str:
    """Exit 2, nothing on stdout, exactly one ``forge: error:`` line on stderr."""
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("forge: error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert out == ""
    return lines[0]


@pytest.fixture
def openai_server() -> Any:
    """A scripted OpenAI-compatible server on 127.0.0.1 (see tests/openai_server.py)."""
    from openai_server import ScriptedOpenAI
    with ScriptedOpenAI() as server:
        yield server


def forget_bench_harness(bench: Path) -> Any:
    """A module-scoped autouse fixture for the tests of one built-in bench.

    forge imports a bench's ``harness`` module under that plain name and keeps the
    bench folder first on sys.path; other benches' tests import their own ``harness``
    the same way, so nothing of this bench's may stay behind. Use as
    ``_forget = forget_bench_harness(BENCH)`` at module level.
    """
    @pytest.fixture(scope="module", autouse=True)
    def _forget() -> Any:
        yield
        module = sys.modules.get("harness")
        if module is not None and Path(getattr(module, "__file__", None) or ".").parent == bench:
            del sys.modules["harness"]
        while str(bench) in sys.path:
            sys.path.remove(str(bench))
    return _forget


def answered(fetch: Any, session: Any, budget: Any = None) -> tuple[Any, list[Any]]:
    """Run a search part (a :data:`~forge.search.attempt_cache.Fetch`) to its end, each
    rollout request answered on ``session`` and each permit by ``budget`` (every one
    granted without), as the search's driver does; its value and the requests, in
    order."""
    from forge.search.attempt_cache import Permit

    requests: list[Any] = []
    try:
        asked = next(fetch)
        while True:
            if isinstance(asked, Permit):
                asked = fetch.send(budget is None or budget.grants(asked))
                continue
            requests.append(asked)
            asked = fetch.send(asked.run(session))
    except StopIteration as done:
        return done.value, requests


def open_session(bench: Bench) -> Any:
    """A session of ``bench`` as the confirmation tests drive it: local, seed 7."""
    from forge.evaluation.session import Session
    from forge.executors import ExecutorSettings

    return Session(bench, ExecutorSettings(), seed=7, concurrency=4, timeout_s=10.0)
