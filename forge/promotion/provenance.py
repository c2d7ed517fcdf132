"""The provenance of a promoted default: the sidecar file beside it, ``F.forge.json``.

``forge promote`` writes a run's final config into a plain YAML file ``F`` and records
in ``F.forge.json`` (see :func:`sidecar_path`) how it got there: a stack of
:class:`Promotion` entries, oldest first. Each one records the run, the sha256 of its
journal, the bench and registry digests, the test comparison, the chain of moves with
their inverses, the config values before and after, the exact previous file content,
and the sha256 of the content forge wrote; ``forge rollback`` pops the last one.

Two files cannot be replaced at once, so the YAML file is the truth and the sidecar's
top entry is *in effect* only while ``F``'s sha256 equals the entry's
``written_sha256``. :func:`settle` recognises an entry left by a promote or rollback
stopped between its two writes (``F`` then holds exactly that entry's previous
content) and drops it; :mod:`forge.promotion.promote` explains the order of the writes.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from forge._util.files import atomic_write_text, load_versioned_json
from forge.config.moves import Move
from forge.errors import PromoteError
from forge.journal.records import PromotedMove, SplitDelta

__all__ = [
    "PROVENANCE_FORMAT_VERSION",
    "SIDECAR_SUFFIX",
    "Promotion",
    "Provenance",
    "load_provenance",
    "settle",
    "sidecar_path",
    "sidecar_text",
    "write_sidecar",
]

PROVENANCE_FORMAT_VERSION = 1
SIDECAR_SUFFIX = ".forge.json"

# Strict members: a JSON ``1`` must come back as the int 1, never as True or 1.0.
_Value = StrictBool | StrictInt | StrictFloat | StrictStr


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Promotion(_Strict):
    """One sidecar entry: everything needed to trust, explain and undo a promotion."""

    run_id: str
    run_folder: str
    journal_sha256: str = Field(description="sha256 of journal.jsonl when promoted")
    run_json_sha256: str
    bench: str
    bench_path: str
    bench_digest: str
    registry_path: str
    registry_digest: str
    test: SplitDelta = Field(description="start, final, delta, ci_low, ci_high on test")
    moves: list[PromotedMove] = Field(min_length=1,
                                      description="from the previous default, in order")
    inverses: list[Move] = Field(description="inverses[i] undoes moves[i]; rollback applies "
                                             "them last first")
    previous: dict[str, _Value] = Field(description="config values before the promotion")
    promoted: dict[str, _Value] = Field(description="config values forge wrote")
    start_fingerprint: str
    final_fingerprint: str
    previous_existed: bool = Field(description="False: the promotion created the file")
    previous_text: str = Field(description="what rollback writes back (the exact old content, "
                                           "or the previous values rendered if there was none)")
    previous_sha256: str
    written_sha256: str = Field(description="sha256 of the file content forge wrote")
    at: datetime
    accepted_beyond_tolerance: list[str] = Field(
        default_factory=list, description="auxiliary checks the test split put beyond their "
        "tolerance, promoted anyway with --accept-beyond-tolerance")

    def holds_previous(self, sha: str | None) -> bool:
        """Whether a file with content ``sha`` (None: no file) is this entry's before-state."""
        return sha == self.previous_sha256 or (sha is None and not self.previous_existed)

    def as_json(self) -> dict[str, Any]:
        """The entry for ``--json`` output; the previous file text stays in the sidecar."""
        out: dict[str, Any] = self.model_dump(mode="json", exclude={"previous_text"})
        return out


class Provenance(_Strict):
    """The sidecar file: the promotions of one file, oldest first; the last is in effect."""

    format_version: int = PROVENANCE_FORMAT_VERSION
    target: str = Field(description="the file this sidecar describes (its name)")
    promotions: list[Promotion] = Field(default_factory=list)


def sidecar_path(target: str | Path) -> Path:
    """``registry/triage.defaults.yaml`` -> ``registry/triage.defaults.yaml.forge.json``."""
    p = Path(target)
    return p.with_name(p.name + SIDECAR_SUFFIX)


def load_provenance(sidecar: Path) -> Provenance:
    """The sidecar's promotions; one that cannot be read is refused (and never overwritten)."""
    return load_versioned_json(sidecar, Provenance, error=PromoteError,
                               version=PROVENANCE_FORMAT_VERSION, what="provenance file")


def sidecar_text(provenance: Provenance) -> str:
    return provenance.model_dump_json(indent=2) + "\n"


def write_sidecar(sidecar: Path, provenance: Provenance) -> None:
    atomic_write_text(sidecar, sidecar_text(provenance))


def settle(stack: list[Promotion], sha: str | None) -> tuple[list[Promotion], Promotion | None]:
    """Drop the top entry when the file (content ``sha``) holds that entry's previous
    content; returns the stack left and the entry dropped.

    That is the trace of a promote stopped before its YAML write, or of a rollback
    stopped before its sidecar write (and of a file put back by hand to its content
    from before the promotion): in every case the entry is not in effect.
    """
    if stack and stack[-1].written_sha256 != sha and stack[-1].holds_previous(sha):
        return stack[:-1], stack[-1]
    return stack, None
