"""The prompt of the ``llm`` proposer: a bounded summary of one :class:`SearchView`.

The caps below are hard: each section has a byte budget and an item cap, and the
whole user message is cut to :data:`MAX_PROMPT_BYTES` as JSON-encoded in the request
body. Every excerpt is redacted of registered secrets *before* it is clipped. The
view holds *dev* data only, so no val or test task can reach the model.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from itertools import zip_longest
from typing import Any

from forge.config.moves import Move
from forge.config.registry import Registry, Scalar, same_value
from forge.proposers.base import SearchView
from forge.proposers.reflect import count_signals
from forge.results.model import AttemptResult
from forge.secrets.masking import redact

__all__ = ["MAX_PROMPT_BYTES", "SYSTEM_PROMPT", "build_messages", "clip"]

#: The user message, measured as JSON-encoded in the request body (escapes count).
MAX_PROMPT_BYTES = 12_000
MAX_SETTINGS = 40  # in registry order
MAX_MOVES = 60  # untried moves, interleaved across settings
MAX_HINTS = 20
MAX_FAILURES = 12  # failing dev attempts, one per task before a second of any task
MAX_HISTORY = 15  # the most recent scored configs
OUTPUT_CHARS = 240  # per excerpt of an attempt's output
ERROR_CHARS = 160  # per excerpt of an error or a scorer's explanation
# Bytes per section, so a long section cannot push the others out of the message.
# They add up to 11,000, leaving room for the head and the failure counts (under 1,000).
_SECTION_BYTES = {"settings": 3_000, "moves": 2_200, "hints": 600, "failures": 4_000,
                  "history": 1_200}

SYSTEM_PROMPT = (
    "You tune the configuration of an agent harness. The tuner changes one setting at a "
    "time, to any legal value within its bounds, and tests every change on held-out data, "
    "so choose exactly one setting and its new value: the change most likely to fix the "
    "failures shown (the listed untried moves are suggestions, not a limit). Reply "
    "with one JSON object and nothing else: "
    '{"setting": "<setting name>", "value": <the new value, as JSON>, '
    '"reason": "<one or two sentences>"}')


def clip(text: str, limit: int) -> str:
    """One line, redacted *before* it is cut (a cut secret would no longer match)."""
    line = " ".join(redact(text).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _enc(text: str) -> int:
    """Bytes ``text`` takes inside a JSON request body (escapes included)."""
    return len(json.dumps(text)) - 2


def _js(value: Any) -> str:
    return json.dumps(value, default=str)


def _rate(part: int, whole: int) -> str:
    return f"{part / whole:.3f}" if whole else "n/a"


def _section(title: str, lines: list[str], total: int, budget: int) -> list[str]:
    """``title`` and as many of ``lines`` as fit in ``budget`` bytes, then what was left out."""
    out, used = [f"## {title}"], _enc(title) + 5
    for line in lines:
        if used + _enc(line) + 2 > budget:
            break
        out.append(line)
        used += _enc(line) + 2
    if total > len(out) - 1:
        out.append(f"(... {total - len(out) + 1} more not shown)")
    return out


def _setting_lines(registry: Registry, values: dict[str, Scalar]) -> list[str]:
    lines = []
    for name, setting in list(registry.settings.items())[:MAX_SETTINGS]:
        line = (f"- {clip(name, 64)}: {setting.type} {clip(setting.bounds_text(), 200)}; "
                f"current {_js(values.get(name))}")
        if setting.description:
            line += f" — {clip(setting.description, 120)}"
        lines.append(line)
    return lines


def _move_lines(untried: list[Move]) -> list[str]:
    by_target: dict[str, list[Move]] = {}
    for move in untried:
        by_target.setdefault(move.target, []).append(move)
    mixed = [m for row in zip_longest(*by_target.values()) for m in row if m is not None]
    return [f"- {clip(m.target, 64)}: {_js(m.before)} -> {_js(m.after)}"
            for m in mixed[:MAX_MOVES]]


def _output_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _failure_line(a: AttemptResult) -> str:
    parts = [f"- {clip(a.task_id, 60)} #{a.attempt}: {a.stop_reason}"]
    if a.score is not None:
        parts.append(f"score {a.score.value:.2f}")
        if a.score.explanation:
            parts.append("scorer: " + clip(a.score.explanation, ERROR_CHARS))
    if a.output is not None:
        if a.output.signals:
            parts.append("signals: " + ", ".join(clip(s, 40) for s in a.output.signals[:6]))
        failed = [c for c in a.output.tool_calls if not c.ok][:2]
        if failed:
            parts.append("failed tools: " + "; ".join(
                clip(f"{c.name}: {c.error or 'failed'}", 100) for c in failed))
        if a.output.output is not None:
            parts.append("output: " + clip(_output_text(a.output.output), OUTPUT_CHARS))
    if a.error:
        parts.append("error: " + clip(a.error, ERROR_CHARS))
    return "; ".join(parts)


def _failure_lines(failing: list[AttemptResult]) -> list[str]:
    """One attempt per task before a second of any task, so one bad task cannot fill it."""
    by_task: dict[str, list[AttemptResult]] = {}
    for a in sorted(failing, key=lambda a: (a.task_id, a.attempt)):
        by_task.setdefault(a.task_id, []).append(a)
    spread = [a for row in zip_longest(*by_task.values()) for a in row if a is not None]
    return [_failure_line(a) for a in spread[:MAX_FAILURES]]


def _history_lines(view: SearchView) -> list[str]:
    lines = []
    for entry in view.history[-MAX_HISTORY:]:
        diff = {k: v for k, v in entry.values.items()
                if not same_value(view.incumbent.values.get(k), v)}
        what = ", ".join(f"{k}={_js(v)}" for k, v in diff.items()) or "the incumbent"
        score = "unscored" if math.isnan(entry.dev_mean) else f"{entry.dev_mean:.3f}"
        lines.append(f"- {clip(what, 200)}: dev mean {score} ({entry.n_tasks} tasks)")
    return lines


def build_messages(view: SearchView) -> list[dict[str, str]]:
    """The system and user messages for one step; the user message is bounded (see module)."""
    failing = [a for a in view.dev_attempts if not a.passed]
    head = _head_lines(view)
    summary = _failing_summary(failing)
    reg = view.registry
    hints = [f"- {clip(signal, 40)}: " + ", ".join(f"{t} {d}" for t, d in moves.items())
             for signal, moves in list(reg.hints.items())[:MAX_HINTS]]
    sections = [
        head,
        _section("Settings (name: type bounds; current value — description)",
                 _setting_lines(reg, view.incumbent.values), len(reg.settings),
                 _SECTION_BYTES["settings"]),
        _section("Untried one-step moves from the incumbent (choose one)",
                 _move_lines(view.untried), len(view.untried), _SECTION_BYTES["moves"]),
    ]
    if hints:
        sections.append(_section("Registry hints (failure signal: setting direction)", hints,
                                 len(reg.hints), _SECTION_BYTES["hints"]))
    failures = _section("Failing dev attempts", _failure_lines(failing), len(failing),
                        _SECTION_BYTES["failures"])
    sections.append(failures[:1] + summary + failures[1:])
    sections.append(_section("Configs scored so far (difference from the incumbent: dev "
                             "mean score)", _history_lines(view), len(view.history),
                             _SECTION_BYTES["history"]))
    text = "\n\n".join("\n".join(lines) for lines in sections)
    while _enc(text) > MAX_PROMPT_BYTES:  # the backstop: the sections fit on their own
        text = text[: int(len(text) * MAX_PROMPT_BYTES / _enc(text)) - 1]
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}]


def _head_lines(view: SearchView) -> list[str]:
    """The step, and how the incumbent did on the dev split."""
    attempts = view.dev_attempts
    scored = [a for a in attempts if a.scored]
    passed = sum(1 for a in scored if a.passed)
    return [f"Step {view.step}. The incumbent config on the dev split: {passed} of "
            f"{len(scored)} scored attempts passed (pass rate {_rate(passed, len(scored))}); "
            f"{len(attempts) - len(scored)} attempts unscored (error, timeout or scorer "
            f"failure); {len({a.task_id for a in attempts})} tasks."]


def _failing_summary(failing: list[AttemptResult]) -> list[str]:
    """The failing attempts counted: tasks, stop reasons, the commonest signals."""
    stops = Counter(a.stop_reason for a in failing)
    signals = count_signals(failing).most_common(10)
    return [f"{len(failing)} failing attempts over {len({a.task_id for a in failing})} "
            "tasks; stop reasons: " + ", ".join(f"{k} {v}" for k, v in sorted(stops.items()))
            + "; signals: " + (", ".join(f"{clip(k, 40)} {v}" for k, v in signals)
                               or "none")]
