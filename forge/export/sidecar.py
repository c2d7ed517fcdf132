"""The sidecar of an SFT export (``OUT.jsonl.meta.json``): its model, reading it, and
checking a JSONL against it line by line (``forge export verify``).

:mod:`forge.export.sft` writes both files and re-exports every public name here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from forge._util.digest import sha256_hex
from forge._util.files import load_versioned_json
from forge.errors import ExportError

__all__ = [
    "SIDECAR_FORMAT_VERSION",
    "SIDECAR_KIND",
    "SIDECAR_SUFFIX",
    "ExportSidecar",
    "SidecarLine",
    "SourceResult",
    "VerifyReport",
    "load_sidecar",
    "sidecar_path",
    "split_lines",
    "verify_export",
]

SIDECAR_FORMAT_VERSION = 1
SIDECAR_KIND = "forge.export.sft.sft"
SIDECAR_SUFFIX = ".meta.json"


def sidecar_path(out: str | Path) -> Path:
    """``OUT.jsonl`` -> ``OUT.jsonl.meta.json``."""
    p = Path(out)
    return p.with_name(p.name + SIDECAR_SUFFIX)


class SidecarLine(BaseModel):
    """One line of the JSONL: where it came from, and the sha256 of its bytes."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    line: int = Field(ge=1)
    task_id: str
    attempt: int = Field(ge=0)
    seed: int
    score: float
    prompt_from: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class SourceResult(BaseModel):
    """The result file an export came from, as it was when exported."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    path: str | None
    sha256: str | None


class ExportSidecar(BaseModel):
    """``OUT.jsonl.meta.json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format_version: int = SIDECAR_FORMAT_VERSION
    kind: str = SIDECAR_KIND
    created_at: str
    jsonl: str
    jsonl_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    line_count: int = Field(ge=0)
    source: SourceResult
    bench: str
    split: str
    k: int
    env_fingerprint: str | None
    config_fingerprint: str
    tasks_digest: str | None
    system: str | None
    prompt_fields: list[str]
    #: Written since duplicates are dropped; a sidecar from before reads as False.
    keep_duplicates: bool = False
    selection: dict[str, int]
    lines: list[SidecarLine]


def split_lines(data: bytes) -> list[bytes]:
    """Lines of a JSONL file as bytes, newline removed. Split on ``\\n`` only: JSON text
    may hold U+2028, which ``str.splitlines`` would take for a line break."""
    if not data:
        return []
    parts = data.split(b"\n")
    if parts[-1] == b"":  # the newline that ends the last line starts no new one
        parts.pop()
    return parts



def load_sidecar(path: str | Path) -> ExportSidecar:
    """Read a sidecar; missing, malformed or of another version is bad input."""
    p = Path(path)
    sidecar = load_versioned_json(
        p, ExportSidecar, error=ExportError, version=SIDECAR_FORMAT_VERSION, what="sidecar",
        missing="no sidecar: expected the .meta.json that forge export sft writes beside the "
                "JSONL")
    if sidecar.kind != SIDECAR_KIND:
        raise ExportError(f"not a forge SFT export sidecar (kind is not {SIDECAR_KIND!r})",
                          file=p, field="kind")
    numbers = [line.line for line in sidecar.lines]
    if sidecar.line_count != len(numbers) or numbers != list(range(1, len(numbers) + 1)):
        raise ExportError("damaged sidecar: line_count and lines[].line do not agree",
                          file=p, field="lines")
    return sidecar


@dataclass(frozen=True)
class VerifyReport:
    """What ``verify`` found. ``problems`` is empty when the file is untouched."""

    path: Path
    sidecar: Path
    expected_lines: int
    actual_lines: int
    expected_sha256: str
    actual_sha256: str
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "path": str(self.path), "sidecar": str(self.sidecar),
                "expected_lines": self.expected_lines, "actual_lines": self.actual_lines,
                "expected_sha256": self.expected_sha256, "actual_sha256": self.actual_sha256,
                "problems": list(self.problems)}


def verify_export(out: str | Path, *, sidecar: str | Path | None = None) -> VerifyReport:
    """Compare ``out`` with its sidecar: whole-file sha256, line count, each line's sha256."""
    out = Path(out)
    meta = Path(sidecar) if sidecar is not None else sidecar_path(out)
    data = _read_export(out)
    side = load_sidecar(meta)
    actual_sha = sha256_hex(data)
    lines = split_lines(data)
    problems = _line_problems(side.lines, [sha256_hex(raw) for raw in lines])
    if data and not data.endswith(b"\n"):
        problems.append(f"line {len(lines)} does not end with a newline: the file was cut "
                        "short or edited")
    if actual_sha != side.jsonl_sha256 and not problems:
        # Every line matches, yet the bytes differ: only what separates lines can.
        problems.append("sha256 of the file differs though every line matches its hash "
                        "(line endings or blank lines changed)")
    return VerifyReport(path=out, sidecar=meta, expected_lines=side.line_count,
                        actual_lines=len(lines), expected_sha256=side.jsonl_sha256,
                        actual_sha256=actual_sha, problems=tuple(problems))


def _read_export(out: Path) -> bytes:
    if not out.exists() and out.name.endswith(SIDECAR_SUFFIX):
        raise ExportError("give the JSONL, not its sidecar", file=out)
    try:
        return out.read_bytes()
    except FileNotFoundError:
        raise ExportError("file not found", file=out) from None
    except OSError as exc:
        raise ExportError(f"cannot read: {exc.strerror or exc}", file=out) from None


def _line_problems(expected: Sequence[SidecarLine], actual: Sequence[str]) -> list[str]:
    """Name each line that differs: edited, moved (where from), swapped, missing, extra."""
    where: dict[str, list[int]] = {}
    for rec in expected:
        where.setdefault(rec.sha256, []).append(rec.line)
    problems: list[str] = []
    reported_swaps: set[int] = set()
    for i in range(min(len(expected), len(actual))):
        rec = expected[i]
        if actual[i] == rec.sha256 or rec.line in reported_swaps:
            continue
        origins = where.get(actual[i], [])
        if not origins:
            problems.append(f"line {rec.line} edited (was task {rec.task_id} attempt "
                            f"{rec.attempt})")
            continue
        problems.append(_displaced(rec, origins, expected, actual, reported_swaps))
    count = _count_problem(len(expected), len(actual))
    if count is not None:
        problems.append(count)
    return problems


def _displaced(rec: SidecarLine, origins: Sequence[int], expected: Sequence[SidecarLine],
               actual: Sequence[str], reported_swaps: set[int]) -> str:
    """Line ``rec`` holds what the lines ``origins`` held: a swap (recorded in
    ``reported_swaps`` so its other half is not named again) or a move."""
    # Identical lines share a hash (the same answer passing twice); among the lines
    # that held this content, prefer one that now holds this line's: a swap.
    swapped = [o for o in origins
               if o - 1 < len(actual) and actual[o - 1] == rec.sha256
               and o not in reported_swaps]
    origin = swapped[0] if swapped else origins[0]
    j = origin - 1
    if swapped:
        reported_swaps.update({rec.line, origin})
        return (f"lines {rec.line} and {origin} swapped (tasks {rec.task_id} and "
                f"{expected[j].task_id})")
    return (f"line {rec.line} holds what line {origin} held (task "
            f"{expected[j].task_id} attempt {expected[j].attempt}): moved")


def _count_problem(expected: int, actual: int) -> str | None:
    """Lines missing at the end, or added after it; None when the counts agree."""
    if actual < expected:
        first, last = actual + 1, expected
        span = f"line {first}" if first == last else f"lines {first}–{last}"
        return f"{span} missing: the file has {actual} of {expected} lines (truncated?)"
    if actual > expected:
        return (f"{actual - expected} line(s) added after line {expected}: the file has "
                f"{actual} lines, the sidecar records {expected}")
    return None
