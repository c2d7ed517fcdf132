"""The attempt store: every attempt a search ran, keyed by (config, stream, task, attempt).

The store is what makes reuse and resume cheap: an incumbent's attempts are run
once and compared against every candidate; a config seen before is never run
again on the same seeds; and a resumed search replays from the store instead of
re-running rollouts. On disk it is an append-only JSONL file, one attempt a line,
flushed and fsynced after each batch; a torn last line (a kill mid-write) is
ignored on load.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from forge.results import AttemptResult
from forge.secrets import redact

__all__ = ["AttemptStore", "iter_jsonl_tolerant"]

log = logging.getLogger(__name__)

Key = tuple[str, str, str, int]


def iter_jsonl_tolerant(path: Path) -> Iterator[dict[str, object]]:
    """Records of an append-only JSONL file; an incomplete last line is skipped.

    A damaged line elsewhere is a real corruption and raises ``ValueError``.
    """
    if not path.exists():
        return
    with path.open("rb") as fh:
        lines = fh.read().split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            if number >= len(lines) - 1:  # the last line: torn by a kill mid-write
                log.warning("%s: ignoring a torn last line", path)
                return
            raise ValueError(f"{path}:{number}: damaged record") from None
        if isinstance(value, dict):
            yield value


def truncate_torn_tail(path: Path) -> None:
    """Cut an incomplete last line so that the next append starts on a fresh line."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        with path.open("r+b") as fh:
            fh.truncate(keep)


class AttemptStore:
    """Attempts by (config fingerprint, seed stream, task id, attempt index)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._data: dict[Key, AttemptResult] = {}
        if path is not None:
            # Cut a torn tail first, so that memory holds exactly what the file does.
            truncate_torn_tail(path)
            for record in iter_jsonl_tolerant(path):
                try:
                    result = AttemptResult.model_validate(record["result"])
                    key = (str(record["config"]), str(record["stream"]), result.task_id,
                           result.attempt)
                except (KeyError, ValidationError):
                    continue
                self._data[key] = result

    def __len__(self) -> int:
        return len(self._data)

    def get(self, config: str, stream: str, task_id: str, attempt: int) -> AttemptResult | None:
        return self._data.get((config, stream, task_id, attempt))

    def add(self, config: str, stream: str, results: Iterable[AttemptResult]) -> None:
        """Keep ``results`` (cancelled attempts are not kept: they say nothing)."""
        lines: list[str] = []
        for r in results:
            if r.stop_reason == "cancelled":
                continue
            self._data[(config, stream, r.task_id, r.attempt)] = r
            lines.append(redact(json.dumps({"config": config, "stream": stream,
                                            "result": r.model_dump(mode="json")})))
        if self.path is not None and lines:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
