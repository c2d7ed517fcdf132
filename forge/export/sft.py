"""Export passing attempts as chat-format SFT data, with a sidecar that proves what they are.

``forge export sft RESULT.json OUT.jsonl --bench BENCH`` writes one JSON line per
selected attempt, and ``OUT.jsonl.meta.json`` beside it (the file name with
``.meta.json`` appended, so any OUT name has exactly one sidecar, listed next to it).

What is selected
    Tasks in the *learning zone* only (``0 < passed < scored``): a task that always
    passes teaches nothing the model does not already do, one that never passes
    has no good answer to copy. From those tasks, every *passing scored* attempt
    whose ``output.output`` is a non-empty string. Other outputs (dicts, runs that
    only called tools, empty strings) have no final answer to end a conversation
    with; they are counted in the sidecar's ``selection`` (``skipped_not_text``), not
    exported. A line identical, byte for byte, to one already written (the same
    answer passing on several attempts) is dropped and counted
    (``skipped_duplicate``) unless ``keep_duplicates``: repeated lines only weight a
    fine-tune towards the tasks it already half solves.

One line
    ``{"messages": [{"role": "system", "content": S}?, {"role": "user", "content": U},
    T..., {"role": "assistant", "content": A}]}``. ``S`` is ``--system`` when given (the
    message is left out otherwise). ``A`` is the attempt's output text as it is. ``U``
    is the task's input as text: a string input as it is; a mapping with a string
    field ``ticket``, ``prompt``, ``question`` or ``input`` (the first found, in that
    order) that field; anything else its canonical JSON (sorted keys, no spaces).
    The sidecar records per line which rule applied (``prompt_from``).

    ``T`` are the attempt's tool calls, in the order made, in the OpenAI chat format:
    per call an assistant message ``{"role": "assistant", "content": null,
    "tool_calls": [{"id": "call_N", "type": "function", "function": {"name", "arguments"
    (a JSON string)}}]}`` and the tool's answer ``{"role": "tool", "tool_call_id":
    "call_N", "content": R}``; ``R`` is the result as the ``openai`` harness feeds it
    back (a string as it is, anything else as JSON; ``error: ...`` for a failed call,
    which the passing attempt then recovered from). Without them a tool-using answer
    ("refunded") would teach a model to claim what it never did. A harness records
    calls, not how they were grouped into turns, so each call is its own turn.
    ``selection.with_tool_calls`` counts the lines that have any.

Why ``--bench``
    A saved result keeps outputs and scores but not the task inputs. The bench gives
    them, and is accepted only if its tasks are exactly those the result was
    evaluated on: the split's digest must equal the result's ``env["tasks"]``.

The sidecar
    ``format_version``, the source result's path and sha256, ``env_fingerprint``,
    ``config_fingerprint``, bench, split, the JSONL's sha256 and line count, a
    ``lines`` list ``[{line, task_id, attempt, seed, score, prompt_from, sha256}]``
    (sha256 of each line's bytes without its newline), and ``created_at``. The JSONL
    is written first and the sidecar last, each atomically: an export interrupted in
    between leaves a sidecar that does not match, which ``verify`` reports.

``forge export verify OUT.jsonl`` recomputes the hashes: the whole-file sha256 says
*whether* the file changed; the per-line hashes say *which* lines were edited,
moved, swapped, added or cut. It detects a swapped or edited file, not a forger who
rewrites both the file and its sidecar (nothing here is signed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forge._util.digest import canonical_json, file_digest, sha256_hex
from forge._util.files import atomic_write_text
from forge.bench.loader import Bench
from forge.errors import ExportError
from forge.export.sidecar import (
    SIDECAR_FORMAT_VERSION,
    SIDECAR_KIND,
    SIDECAR_SUFFIX,
    ExportSidecar,
    SidecarLine,
    SourceResult,
    VerifyReport,
    load_sidecar,
    sidecar_path,
    split_lines,
    verify_export,
)
from forge.harness import ToolCall
from forge.results.model import AttemptResult, EvalResult

__all__ = [
    "PROMPT_FIELDS",
    "SIDECAR_FORMAT_VERSION",
    "SIDECAR_KIND",
    "SIDECAR_SUFFIX",
    "ExportSidecar",
    "ExportSummary",
    "SidecarLine",
    "SourceResult",
    "VerifyReport",
    "export_sft",
    "load_sidecar",
    "prompt_text",
    "select_attempts",
    "sidecar_path",
    "task_inputs",
    "tool_turns",
    "verify_export",
]

#: Fields of a mapping input used as the user turn, first found wins.
PROMPT_FIELDS = ("ticket", "prompt", "question", "input")


def prompt_text(task_input: Any) -> tuple[str, str]:
    """The user turn for a task input, and which rule made it (``text``, ``field:NAME``
    or ``json``); see the module docstring."""
    if isinstance(task_input, str):
        return task_input, "text"
    if isinstance(task_input, Mapping):
        for name in PROMPT_FIELDS:
            value = task_input.get(name)
            if isinstance(value, str):
                return value, f"field:{name}"
    return canonical_json(task_input), "json"


def task_inputs(bench: Bench, result: EvalResult, *,
                source: str | Path | None = None) -> dict[str, Any]:
    """Task id -> input, from a bench whose split holds exactly the result's tasks.

    Refused (:class:`~forge.errors.ExportError` naming the bench file and field, or
    the result file ``source``) when the bench has another name, or when its split
    digest is not the one in the result's env: the prompts would then not be the
    ones the outputs answered.
    """
    if bench.name != result.bench:
        raise ExportError(f"bench {bench.name!r} is not the result's bench {result.bench!r}",
                          file=bench.path, field="name")
    tasks = bench.tasks(result.split)
    recorded = result.env.get("tasks")
    if not isinstance(recorded, str):
        raise ExportError("the result records no tasks digest, so its task inputs cannot be "
                          "matched to a bench", file=source, field="env.tasks")
    actual = bench.split_digest(result.split)
    if actual != recorded:
        raise ExportError(f"split {result.split!r} is not the one the result was evaluated "
                          f"on (tasks digest {actual[:12]} vs {recorded[:12]})",
                          file=bench.path, field=f"splits.{result.split}")
    return {t.id: t.input for t in tasks}


# -- selecting and writing -----------------------------------------------------------


@dataclass(frozen=True)
class _Selected:
    attempt: AttemptResult
    text: str


@dataclass
class _Selection:
    attempts: list[_Selected] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def select_attempts(result: EvalResult) -> list[tuple[AttemptResult, str]]:
    """The attempts ``export_sft`` exports, in result order, with their output text
    (before it drops lines that repeat one already written)."""
    return [(s.attempt, s.text) for s in _select(result).attempts]


def _select(result: EvalResult) -> _Selection:
    sel = _Selection()
    counts = {"tasks": len(result.tasks), "learning_zone_tasks": 0, "passing_attempts": 0,
              "skipped_not_text": 0, "skipped_duplicate": 0, "with_tool_calls": 0,
              "exported": 0}
    for task in result.tasks:
        if not task.learning_zone:
            continue
        counts["learning_zone_tasks"] += 1
        for a in task.scored_attempts:
            if not a.passed:
                continue
            counts["passing_attempts"] += 1
            text = a.output.output if a.output is not None else None
            # Only text can be an assistant turn; an empty one would teach silence.
            if not isinstance(text, str) or not text:
                counts["skipped_not_text"] += 1
                continue
            sel.attempts.append(_Selected(a, text))
    counts["exported"] = len(sel.attempts)
    sel.counts = counts
    return sel


@dataclass(frozen=True)
class ExportSummary:
    out: Path
    sidecar: Path
    line_count: int
    jsonl_sha256: str
    selection: dict[str, int]


def export_sft(result: EvalResult, out: str | Path, *, inputs: Mapping[str, Any],
               source: str | Path | None = None, system: str | None = None,
               keep_duplicates: bool = False, now: datetime | None = None) -> ExportSummary:
    """Write the SFT JSONL and its sidecar (JSONL first, sidecar last, both atomic).

    ``inputs`` maps task id -> task input (see :func:`task_inputs`); ``source`` is the
    result file, whose path and sha256 the sidecar records. Exact duplicate lines are
    dropped unless ``keep_duplicates``.
    """
    out = Path(out)
    meta = sidecar_path(out)
    _check_destination(out, meta, source)
    sel = _select(result)
    rows, lines = _render(sel, inputs, source=source, system=system,
                          keep_duplicates=keep_duplicates)
    sel.counts["exported"] = len(rows)
    source_sha = _source_digest(source)
    data = _write_jsonl(out, lines)
    written = split_lines(data)
    if len(written) != len(rows):  # another writer came between our write and our read
        raise ExportError(f"wrote {len(rows)} lines, read back {len(written)}", file=out)
    tasks_digest = result.env.get("tasks")
    sidecar = ExportSidecar(
        created_at=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
        jsonl=out.name, jsonl_sha256=sha256_hex(data), line_count=len(rows),
        source=SourceResult(path=str(source) if source is not None else None,
                            sha256=source_sha),
        bench=result.bench, split=result.split, k=result.k,
        env_fingerprint=result.env_fingerprint, config_fingerprint=result.config_fingerprint,
        tasks_digest=tasks_digest if isinstance(tasks_digest, str) else None,
        system=system or None, prompt_fields=list(PROMPT_FIELDS),
        keep_duplicates=keep_duplicates, selection=sel.counts,
        lines=_sidecar_lines(rows, written),
    )
    try:
        atomic_write_text(meta, sidecar.model_dump_json(indent=2) + "\n")
    except OSError as exc:
        raise ExportError(f"cannot write: {exc.strerror or exc}", file=meta) from None
    return ExportSummary(out=out, sidecar=meta, line_count=len(rows),
                         jsonl_sha256=sidecar.jsonl_sha256, selection=sel.counts)


def _check_destination(out: Path, meta: Path, source: str | Path | None) -> None:
    """Refuse a JSONL path that is a folder or would overwrite the exported result."""
    if source is not None and Path(source).resolve() in {out.resolve(), meta.resolve()}:
        raise ExportError("would overwrite the result it exports from", file=out)
    if out.is_dir():
        raise ExportError("is a folder; expected a file path for the JSONL", file=out)


def _render(sel: _Selection, inputs: Mapping[str, Any], *, source: str | Path | None,
            system: str | None, keep_duplicates: bool
            ) -> tuple[list[tuple[_Selected, str]], list[str]]:
    """The selected attempts as JSONL lines, each with its attempt and the input field
    its prompt came from; counts duplicates dropped and lines with tool calls."""
    rows: list[tuple[_Selected, str]] = []
    lines: list[str] = []
    seen: set[str] = set()
    for s in sel.attempts:
        task_id = s.attempt.task_id
        if task_id not in inputs:
            raise ExportError(f"task {task_id!r} of the result has no input in the bench",
                              file=source)
        user, prompt_from = prompt_text(inputs[task_id])
        calls = s.attempt.output.tool_calls if s.attempt.output is not None else []
        line = _message_line(system, user, calls, s.text)
        if line in seen and not keep_duplicates:
            sel.counts["skipped_duplicate"] += 1
            continue
        seen.add(line)
        sel.counts["with_tool_calls"] += bool(calls)
        lines.append(line)
        rows.append((s, prompt_from))
    return rows, lines


def _message_line(system: str | None, user: str, calls: Sequence[ToolCall], text: str) -> str:
    """One chat record: the system prompt if any, the user turn, the tool turns and the
    assistant's answer."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system \
        else []
    messages += [{"role": "user", "content": user}, *tool_turns(calls),
                 {"role": "assistant", "content": text}]
    # json.dumps escapes newlines inside strings, so one record is one line.
    return json.dumps({"messages": messages}, ensure_ascii=False, allow_nan=False)


def _source_digest(source: str | Path | None) -> str | None:
    if source is None:
        return None
    try:
        return file_digest(source)
    except OSError as exc:
        raise ExportError(f"cannot read: {exc.strerror or exc}", file=source) from None


def _write_jsonl(out: Path, lines: list[str]) -> bytes:
    """Write the lines and return the bytes on disk."""
    try:
        atomic_write_text(out, "".join(line + "\n" for line in lines))
        # Hash what is on disk, split the way verify splits it: export and verify then
        # agree by construction, whatever the platform did to the bytes.
        return out.read_bytes()
    except OSError as exc:
        raise ExportError(f"cannot write: {exc.strerror or exc}", file=out) from None


def _sidecar_lines(rows: list[tuple[_Selected, str]], written: list[bytes]
                   ) -> list[SidecarLine]:
    return [SidecarLine(line=i, task_id=s.attempt.task_id, attempt=s.attempt.attempt,
                        seed=s.attempt.seed,
                        score=s.attempt.score.value if s.attempt.score else 0.0,
                        prompt_from=prompt_from, sha256=sha256_hex(raw))
            for i, ((s, prompt_from), raw) in enumerate(zip(rows, written, strict=True),
                                                        start=1)]


def tool_turns(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """The OpenAI chat messages of an attempt's tool calls: per call, the assistant's
    request and the tool's answer (see the module docstring)."""
    turns: list[dict[str, Any]] = []
    for i, call in enumerate(calls):
        call_id = f"call_{i}"
        turns.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": call.name,
                          "arguments": json.dumps(call.args, ensure_ascii=False)}}]})
        turns.append({"role": "tool", "tool_call_id": call_id, "content": _tool_text(call)})
    return turns


def _tool_text(call: ToolCall) -> str:
    # As forge's tool runner words it for the model (forge/harness/tools.py), so an
    # export of an ``openai`` harness run shows the model what it was shown.
    if not call.ok:
        return f"error: {call.error or 'failed'}"
    if isinstance(call.result, str):
        return call.result
    return json.dumps(call.result, ensure_ascii=False)
