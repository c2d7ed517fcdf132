"""The runtime mutator: off does nothing, observe never changes a config, act stays inside
the allow-list, the bounds and the cap, and every run ends on its original config.

The property tests draw random registries (every setting type, linear and log
scales, enums of strings and of numbers) with a random ``runtime`` section, a
random valid start config, and random sequences of signals (some with a rule, some
without, rules on settings outside ``allow``), and check the contracts after every
signal, at the end of the run, and across concurrent runs.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from forge.config.moves import Move
from forge.config.registry import Registry, same_value
from forge.errors import OptionError, RuntimeMutatorError, UserError
from forge.runtime import (
    RuntimeDecision,
    RuntimeEndRecord,
    RuntimeJournal,
    RuntimeJournalError,
    RuntimeMutator,
    RuntimeSignalRecord,
    parse_mode,
    read_runtime_journal,
    step_value,
)
from forge.runtime._mutator import ALREADY, CAP_REACHED, NOT_ALLOWED, OUT_OF_BOUNDS, UNDO

SIGNALS = ("cap_hit", "reject", "timeout", "tool_error", "unknown")


class MemoryJournal(RuntimeJournal):
    """A journal that keeps its records in memory (property tests write thousands)."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent/never-written.jsonl"))
        self.records: list[RuntimeSignalRecord | RuntimeEndRecord] = []
        self._memory_lock = threading.Lock()

    def write(self, record: RuntimeSignalRecord | RuntimeEndRecord) -> None:
        # Round-trip through JSON, as a reader of the file would see the record.
        line = record.model_dump_json()
        with self._memory_lock:
            self.records.append(type(record).model_validate_json(line))


class ExplodingJournal(RuntimeJournal):
    def __init__(self) -> None:
        super().__init__(Path("/nonexistent/never-written.jsonl"))

    def write(self, record: RuntimeSignalRecord | RuntimeEndRecord) -> None:
        raise AssertionError("off mode must not journal")


# -- strategies ---------------------------------------------------------------------------


@st.composite
def setting_specs(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["int", "float", "bool", "enum"]))
    if kind == "int":
        log = draw(st.booleans())
        lo = draw(st.integers(1, 6)) if log else draw(st.integers(-5, 5))
        hi = lo + draw(st.integers(0, 40 if log else 10))
        spec: dict[str, Any] = {"type": "int", "min": lo, "max": hi,
                                "default": draw(st.integers(lo, hi))}
        if log:
            spec["scale"] = "log"
        else:  # the default on the step grid from min, as a registry requires
            spec["step"] = step = draw(st.integers(1, 3))
            spec["default"] = lo + step * draw(st.integers(0, (hi - lo) // step))
        return spec
    if kind == "float":
        log = draw(st.booleans())
        lo = draw(st.sampled_from([0.001, 0.1, 0.5, 1.0])) if log else draw(
            st.sampled_from([-1.0, 0.0, 0.25]))
        hi = lo + draw(st.sampled_from([0.0, 0.3, 1.0, 1.5, 10.0]))
        spec = {"type": "float", "min": lo, "max": hi,
                "default": draw(st.floats(lo, hi, allow_nan=False))}
        if log:
            spec["scale"] = "log"
        elif draw(st.booleans()):
            spec["step"] = step = draw(st.sampled_from([0.05, 0.1, 0.3, 1.0]))
            spec["default"] = lo + step * draw(st.integers(0, math.floor((hi - lo) / step)))
        return spec
    if kind == "bool":
        return {"type": "bool", "default": draw(st.booleans())}
    choices = draw(st.one_of(
        st.lists(st.sampled_from(["bm25", "tfidf", "hybrid", "dense"]), min_size=2,
                 max_size=4, unique=True),
        st.lists(st.sampled_from([1, 2, 4, 8]), min_size=2, max_size=4, unique=True)))
    return {"type": "enum", "choices": choices, "default": draw(st.sampled_from(choices))}


def _directions(spec: dict[str, Any]) -> list[str]:
    if spec["type"] == "bool":
        return ["toggle"]
    if spec["type"] == "enum":
        return [str(c) for c in spec["choices"]]
    return ["up", "down"]


@st.composite
def cases(draw: st.DrawFn) -> tuple[Registry, dict[str, Any], list[str]]:
    """A registry with a runtime section, a valid start config, and a signal sequence."""
    n = draw(st.integers(1, 5))
    specs = {f"s{i}": draw(setting_specs()) for i in range(n)}
    names = list(specs)
    # Mostly allowed, so that moves are made; sometimes not, so that refusals are seen.
    allow = [name for name in names if draw(st.integers(0, 9)) < 7]
    rules = [{"on": draw(st.sampled_from(SIGNALS[:-1])), "target": target,
              "direction": draw(st.sampled_from(_directions(specs[target])))}
             for target in draw(st.lists(st.sampled_from(names), min_size=1, max_size=6))]
    registry = Registry.model_validate({
        "name": "prop", "settings": specs,
        "runtime": {"allow": allow, "max_moves_per_run": draw(st.integers(0, 4)),
                    "rules": rules}})
    config: dict[str, Any] = {}
    for name, spec in specs.items():
        if spec["type"] == "int":
            config[name] = draw(st.integers(spec["min"], spec["max"]))
        elif spec["type"] == "float":
            config[name] = draw(st.floats(spec["min"], spec["max"], allow_nan=False))
        elif spec["type"] == "bool":
            config[name] = draw(st.booleans())
        else:
            config[name] = draw(st.sampled_from(spec["choices"]))
    signals = draw(st.lists(st.sampled_from(SIGNALS), min_size=1, max_size=25))
    return registry, config, signals


def identical(a: Any, b: Any) -> bool:
    """Equal keys and, per key, equal type and value (True, 1 and 1.0 are all different)."""
    a, b = dict(a), dict(b)
    return a.keys() == b.keys() and all(type(a[k]) is type(b[k]) and a[k] == b[k] for k in a)


def play(registry: Registry, mode: str, config: dict[str, Any], signals: list[str],
         journal: RuntimeJournal | None = None) -> tuple[list[RuntimeDecision], dict[str, Any]]:
    """Signals through one run; returns the decisions and ``run.config`` after the end."""
    mutator = RuntimeMutator(registry, mode, journal=journal)
    with mutator.run(config, run_id="r") as run:
        decisions = [run.signal(s) for s in signals]
    return decisions, dict(run.config)


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(cases())
def test_observe_never_changes_a_config(case: tuple[Registry, dict[str, Any], list[str]]
                                        ) -> None:
    registry, config, signals = case
    before = copy.deepcopy(config)
    journal = MemoryJournal()
    mutator = RuntimeMutator(registry, "observe", journal=journal)
    with mutator.run(config, run_id="obs") as run:
        for name in signals:
            decision = run.signal(name)
            assert decision.outcome in ("observed", "refused", "no_rule")
            assert identical(run.config, before)  # what the harness reads: unchanged
    assert identical(run.config, before)
    assert identical(config, before)  # and the caller's dict was never touched
    assert [r.kind for r in journal.records] == ["signal"] * len(signals) + ["end"]
    end = journal.records[-1]
    assert isinstance(end, RuntimeEndRecord) and end.restored_ok


@settings(max_examples=400, deadline=None)
@given(cases())
def test_act_stays_in_bounds_allow_list_and_cap_and_restores_exactly(
        case: tuple[Registry, dict[str, Any], list[str]]) -> None:
    registry, config, signals = case
    assert registry.runtime is not None
    before = copy.deepcopy(config)
    cap = registry.runtime.max_moves_per_run
    allow = set(registry.runtime.allow)
    journal = MemoryJournal()
    mutator = RuntimeMutator(registry, "act", journal=journal)
    applied: list[Move] = []
    with mutator.run(config, run_id="act") as run:
        for name in signals:
            current = dict(run.config)
            decision = run.signal(name)
            event(f"{decision.outcome}: {decision.reason}" if decision.reason
                  else decision.outcome)  # --hypothesis-show-statistics: what was covered
            if decision.applied:
                move = decision.move
                assert move is not None and move.target in allow
                assert same_value(move.before, current[move.target])
                # one step: a neighbour of the value it replaced, so inside the bounds
                setting = registry.settings[move.target]
                assert any(same_value(move.after, v) for v in setting.neighbours(move.before))
                applied.append(move)
            for key, value in run.config.items():
                registry.settings[key].check(value)  # never out of bounds
                if key not in allow:
                    assert value is before[key]  # outside allow: never touched
            assert len(applied) <= cap
            changed = {k for k in before if not same_value(before[k], run.config[k])}
            assert changed <= allow
    assert len(applied) <= cap
    assert identical(run.config, before)  # the end restores the original exactly
    assert identical(config, before)
    end = journal.records[-1]
    assert isinstance(end, RuntimeEndRecord) and end.restored_ok
    assert end.restored == [m.inverse() for m in reversed(applied)]  # reverse order
    for record, move in zip([r for r in journal.records if isinstance(r, RuntimeSignalRecord)
                             and r.outcome == "applied"], applied, strict=True):
        assert record.move == move and record.inverse == move.inverse()


@settings(max_examples=300, deadline=None)
@given(cases())
def test_observe_journals_exactly_what_act_would_do(
        case: tuple[Registry, dict[str, Any], list[str]]) -> None:
    """The virtual copy: observe's decisions are act's, with ``observed`` for ``applied``."""
    registry, config, signals = case
    observed, _ = play(registry, "observe", config, signals)
    acted, _ = play(registry, "act", config, signals)
    as_act = [(d.signal, "applied" if d.outcome == "observed" else d.outcome, d.move, d.reason)
              for d in observed]
    assert as_act == [(d.signal, d.outcome, d.move, d.reason) for d in acted]


@settings(max_examples=200, deadline=None)
@given(cases())
def test_off_does_nothing(case: tuple[Registry, dict[str, Any], list[str]]) -> None:
    registry, config, signals = case
    before = copy.deepcopy(config)
    decisions, after = play(registry, "off", config, signals, journal=ExplodingJournal())
    assert [d.outcome for d in decisions] == ["off"] * len(signals)
    assert all(d.move is None for d in decisions)
    assert identical(after, before) and identical(config, before)


def steps(registry: Registry, config: dict[str, Any], signals: list[str]
          ) -> list[tuple[str, Move | None, dict[str, Any]]]:
    """Each signal's outcome, move and the run's config after it, played alone."""
    out = []
    with RuntimeMutator(registry, "act").run(config) as run:
        for name in signals:
            d = run.signal(name)
            out.append((d.outcome, d.move, dict(run.config)))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.lists(st.lists(st.sampled_from(SIGNALS), max_size=25), min_size=2,
                         max_size=5))
def test_concurrent_threads_keep_their_own_copies(
        case: tuple[Registry, dict[str, Any], list[str]], sequences: list[list[str]]) -> None:
    """Threads share one mutator and one journal, and start together; each run's
    decisions and config, signal by signal, are those of its signals played alone."""
    registry, config, _ = case
    expected = [steps(registry, config, seq) for seq in sequences]
    journal = MemoryJournal()
    mutator = RuntimeMutator(registry, "act", journal=journal)
    barrier = threading.Barrier(len(sequences))
    results: list[Any] = [None] * len(sequences)

    def worker(i: int) -> None:
        got = []
        with mutator.run(config, run_id=f"t{i}") as run:
            barrier.wait()
            for name in sequences[i]:
                d = run.signal(name)
                got.append((d.outcome, d.move, dict(run.config)))
        results[i] = (got, dict(run.config))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(sequences))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(len(sequences)):
        got, final = results[i]
        assert got == expected[i]
        assert identical(final, config)
    ends = [r for r in journal.records if isinstance(r, RuntimeEndRecord)]
    assert sorted(r.run_id for r in ends) == sorted(f"t{i}" for i in range(len(sequences)))
    assert all(r.restored_ok for r in ends)
    assert len(journal.records) == len(ends) + sum(map(len, sequences))


def test_concurrent_asyncio_tasks_keep_their_own_copies(registry: Registry) -> None:
    mutator = RuntimeMutator(registry, "act")
    start = {"max_iterations": 2, "search_width": 4, "temperature": 0.7,
             "retrieval": "bm25", "query_expansion": False}
    seen: dict[str, list[dict[str, Any]]] = {}

    async def one(run_id: str, signals: list[str]) -> None:
        async with mutator.run(start, run_id=run_id) as run:
            seen[run_id] = []
            for name in signals:
                run.signal(name)
                await asyncio.sleep(0)  # let the other task move its own copy
                seen[run_id].append(dict(run.config))
        assert identical(run.config, start)

    async def main() -> None:
        await asyncio.gather(one("a", ["cap_hit", "cap_hit", "cap_hit"]),
                             one("b", ["narrow", "narrow", "flip"]))

    asyncio.run(main())
    assert [c["max_iterations"] for c in seen["a"]] == [3, 4, 4]  # cap 2
    assert all(c["search_width"] == 4 for c in seen["a"])
    assert [c["search_width"] for c in seen["b"]] == [2, 1, 1]
    assert all(c["max_iterations"] == 2 for c in seen["b"])


# -- rules, one by one --------------------------------------------------------------------

REGISTRY = {
    "name": "unit",
    "settings": {
        "max_iterations": {"type": "int", "min": 1, "max": 8, "default": 2},
        "search_width": {"type": "int", "min": 1, "max": 16, "default": 4, "scale": "log"},
        "temperature": {"type": "float", "min": 0.0, "max": 1.5, "step": 0.1, "default": 0.7},
        "retrieval": {"type": "enum", "choices": ["bm25", "tfidf", "hybrid"], "default": "bm25"},
        "query_expansion": {"type": "bool", "default": False},
    },
    "runtime": {
        "allow": ["max_iterations", "search_width", "query_expansion", "retrieval"],
        "max_moves_per_run": 2,
        "rules": [
            {"on": "cap_hit", "target": "max_iterations", "direction": "up"},
            {"on": "narrow", "target": "search_width", "direction": "down"},
            {"on": "flip", "target": "query_expansion", "direction": "toggle"},
            {"on": "typo", "target": "retrieval", "direction": "hybrid"},
            {"on": "hot", "target": "temperature", "direction": "down"},
            {"on": "cap_hit", "target": "search_width", "direction": "up"},  # shadowed
        ],
    },
}


@pytest.fixture
def registry() -> Registry:
    return Registry.model_validate(REGISTRY)


def start(registry: Registry, **values: Any) -> dict[str, Any]:
    return {**registry.defaults().values, **values}


def test_directions_map_to_neighbours(registry: Registry) -> None:
    s = registry.settings
    assert step_value(s["max_iterations"], 2, "up") == 3
    assert step_value(s["max_iterations"], 1, "down") is None  # at the bound
    assert step_value(s["search_width"], 4, "up") == 8  # log scale: x2
    assert step_value(s["search_width"], 16, "up") is None
    assert step_value(s["temperature"], 0.7, "down") == 0.6  # not 0.6000000000000001
    assert step_value(s["query_expansion"], False, "toggle") is True
    assert step_value(s["retrieval"], "bm25", "hybrid") == "hybrid"
    assert step_value(s["retrieval"], "hybrid", "hybrid") is None


def test_each_refusal_reason(registry: Registry) -> None:
    mutator = RuntimeMutator(registry, "act")
    with mutator.run(start(registry, max_iterations=8, retrieval="hybrid")) as run:
        assert run.signal("hot").reason == NOT_ALLOWED  # temperature is not in allow
        assert run.signal("hot").move == Move(target="temperature", before=0.7, after=0.6)
        assert run.signal("cap_hit").reason == OUT_OF_BOUNDS
        assert run.signal("cap_hit").move is None
        assert run.signal("typo").reason == ALREADY
        assert run.signal("flip").outcome == "applied"
        assert run.signal("flip").reason == UNDO  # flipping back would oscillate
        assert run.signal("narrow").outcome == "applied"  # 4 -> 2: the second move
        refused = run.signal("narrow")
        assert (refused.reason, refused.move) == (CAP_REACHED, Move(target="search_width",
                                                                   before=2, after=1))
        assert run.signal("no such signal").outcome == "no_rule"
        assert dict(run.config) == start(registry, max_iterations=8, retrieval="hybrid",
                                         query_expansion=True, search_width=2)
    assert dict(run.config) == start(registry, max_iterations=8, retrieval="hybrid")


def test_the_first_rule_for_a_signal_wins(registry: Registry,
                                          caplog: pytest.LogCaptureFixture) -> None:
    mutator = RuntimeMutator(registry, "act")
    assert "shadowed" in caplog.text
    with mutator.run(start(registry)) as run:
        assert run.signal("cap_hit").move == Move(target="max_iterations", before=2, after=3)


def test_run_config_is_read_only_and_a_fresh_copy_per_run(registry: Registry) -> None:
    mutator = RuntimeMutator(registry, "act")
    config = start(registry)
    with mutator.run(config) as one, mutator.run(config) as two:
        with pytest.raises(TypeError):
            one.config["max_iterations"] = 5  # type: ignore[index]
        one.signal("cap_hit")
        assert (one.config["max_iterations"], two.config["max_iterations"]) == (3, 2)
        assert config["max_iterations"] == 2


def test_a_run_that_raises_is_restored_and_journaled(registry: Registry) -> None:
    journal = MemoryJournal()
    mutator = RuntimeMutator(registry, "act", journal=journal)
    with pytest.raises(KeyError), mutator.run(start(registry), run_id="boom") as run:
        run.signal("cap_hit")
        raise KeyError("harness bug")
    assert run.config["max_iterations"] == 2
    end = journal.records[-1]
    assert isinstance(end, RuntimeEndRecord)
    assert (end.error, end.restored_ok, end.counts) == ("KeyError", True, {"applied": 1})
    with pytest.raises(RuntimeMutatorError, match="has ended"):
        run.signal("cap_hit")


def test_an_invalid_start_value_refuses_its_rules_and_never_raises(registry: Registry) -> None:
    config = start(registry, max_iterations=99)
    del config["search_width"]
    for mode in ("observe", "act"):
        with RuntimeMutator(registry, mode).run(config) as run:
            assert run.signal("cap_hit").reason == "current value invalid"
            assert run.signal("narrow").reason == "current value invalid"
            assert run.signal("flip").outcome in ("observed", "applied")
        assert identical(run.config, config)


def test_no_runtime_section_means_no_rules(registry: Registry) -> None:
    bare = Registry.model_validate({**REGISTRY, "runtime": None})
    with RuntimeMutator(bare, "act").run(start(registry)) as run:
        assert run.signal("cap_hit").outcome == "no_rule"


def test_modes(registry: Registry) -> None:
    assert parse_mode(None) == parse_mode("") == parse_mode(" OFF ") == "off"
    assert parse_mode("observe") == "observe"
    with pytest.raises(UserError, match="expected one of off, observe, act"):
        RuntimeMutator(registry, "sometimes")
    with pytest.raises(OptionError) as info:
        RuntimeMutator.from_env(registry, environ={"FORGE_RUNTIME_MODE": "always"})
    assert info.value.option == "FORGE_RUNTIME_MODE"
    assert str(info.value) == ("FORGE_RUNTIME_MODE: runtime mode 'always'; expected one of "
                               "off, observe, act")
    env = {"FORGE_RUNTIME_MODE": "observe", "FORGE_RUNTIME_JOURNAL": "/tmp/x.jsonl"}
    mutator = RuntimeMutator.from_env(registry, environ=env)
    assert mutator.mode == "observe" and mutator.journal is not None
    assert str(mutator.journal.path) == "/tmp/x.jsonl"
    assert RuntimeMutator.from_env(registry, environ={}).mode == "off"


# -- the journal on disk -----------------------------------------------------------------


def test_off_creates_no_journal_file(registry: Registry, tmp_path: Path) -> None:
    path = tmp_path / "sub" / "runtime.jsonl"
    with RuntimeMutator(registry, "off", journal=path) as mutator:
        with mutator.run(start(registry)) as run:
            for _ in range(100):
                assert run.signal("cap_hit").outcome == "off"
        assert mutator.journal is None
    assert not path.exists() and not path.parent.exists()


def test_journal_records_on_disk(registry: Registry, tmp_path: Path) -> None:
    path = tmp_path / "runtime.jsonl"
    mutator = RuntimeMutator(registry, "observe", journal=path)
    with mutator, mutator.run(start(registry), run_id="one") as run:
        run.signal("cap_hit")
        # flushed per record: on disk before the run ends
        assert len(path.read_text().splitlines()) == 1
        run.signal("hot")
        run.signal("nothing")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["signal", "signal", "signal", "end"]
    first = lines[0]
    assert set(first) == {"format_version", "at", "run_id", "mode", "registry",
                          "registry_digest", "kind", "signal", "rule", "move", "outcome",
                          "inverse", "reason"}
    assert first["move"] == {"target": "max_iterations", "before": 2, "after": 3}
    assert first["inverse"] == {"target": "max_iterations", "before": 3, "after": 2}
    assert (first["outcome"], first["mode"], first["run_id"]) == ("observed", "observe", "one")
    assert first["registry_digest"] == registry.digest
    assert (lines[1]["outcome"], lines[1]["reason"], lines[1]["inverse"]) == (
        "refused", NOT_ALLOWED, None)
    assert lines[2]["outcome"] == "no_rule"
    assert lines[3]["restored"] == [first["inverse"]] and lines[3]["restored_ok"] is True
    assert [r.kind for _, r in read_runtime_journal(path)] == ["signal"] * 3 + ["end"]


def test_a_torn_last_line_is_skipped_and_cut_before_the_next_append(
        registry: Registry, tmp_path: Path) -> None:
    path = tmp_path / "runtime.jsonl"
    with RuntimeMutator(registry, "act", journal=path) as mutator, mutator.run(
            start(registry)) as run:
        run.signal("cap_hit")
    whole = path.read_bytes()
    path.write_bytes(whole + whole[:40])  # a kill mid-write
    assert len(read_runtime_journal(path)) == 2
    with RuntimeMutator(registry, "act", journal=path) as mutator, mutator.run(
            start(registry)) as run:
        run.signal("cap_hit")
    assert len(read_runtime_journal(path)) == 4  # nothing glued onto the torn line


@pytest.mark.parametrize(("content", "fragment"), [
    (b'{"x": 1\n{"y": 2}\n', ":1: malformed JSON"),
    (b"[1, 2]\n", ":1: expected a JSON object"),
    (b'{"format_version": 7}\n', ":1: format_version: format_version 7 is not readable"),
    (b'{"format_version": 1, "kind": "signal"}\n', ":1: "),
])
def test_bad_journals_are_refused_with_their_line(tmp_path: Path, content: bytes,
                                                  fragment: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(RuntimeJournalError, match=None) as info:
        read_runtime_journal(path)
    assert fragment in str(info.value) and str(path) in str(info.value)


def test_a_missing_journal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeJournalError, match="file not found"):
        read_runtime_journal(tmp_path / "nope.jsonl")
    with pytest.raises(RuntimeJournalError, match="is a folder"):
        read_runtime_journal(tmp_path)


def test_observe_goes_on_when_the_journal_cannot_be_written(
        registry: Registry, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    mutator = RuntimeMutator(registry, "observe", journal=blocker / "runtime.jsonl")
    with mutator.run(start(registry)) as run:
        assert run.signal("cap_hit").outcome == "observed"
        assert run.signal("cap_hit").outcome == "observed"
    assert caplog.text.count("cannot be written") == 1
    # act is loud: a move that cannot be journaled is not made, and the run fails
    act = RuntimeMutator(registry, "act", journal=blocker / "runtime.jsonl")
    run = act.run(start(registry))
    with pytest.raises(OSError):
        run.signal("cap_hit")
    assert run.config["max_iterations"] == 2  # not journaled, so not applied
    with pytest.raises(OSError):
        run.close()  # the end record cannot be written either; the config is restored
    assert identical(run.config, start(registry))
