"""Promote a finished search run's final config as the new default, and roll it back.

Two files describe a promoted default ``F``: ``F`` itself, a plain YAML mapping
``setting: value`` that :func:`forge.config.registry.load_config` reads unchanged (forge writes
it with :func:`forge.config.yaml_file.render_config`, under a header comment naming the run,
its moves and its test result), and its sidecar ``F.forge.json``, the provenance
(:mod:`forge.promotion.provenance`).

Crash consistency. Every write is atomic (:func:`forge._util.files.atomic_write_text`),
but two files cannot be replaced at once, so the YAML file is the truth and the
sidecar's top entry is *in effect* only while ``F``'s sha256 equals the entry's
``written_sha256``:

* ``promote`` writes the sidecar first (an intent record) and the YAML last (the
  commit). A crash between the two leaves ``F`` holding its previous content.
* ``rollback`` writes the YAML first (the commit) and pops the sidecar entry last.
  A crash between the two leaves ``F`` holding the entry's previous content too.

So in both cases the top entry describes a change that ``F`` does not show, while
``F`` holds exactly that entry's previous content; every later ``promote`` or
``rollback`` recognises this (:func:`forge.promotion.provenance.settle`) and drops the entry.
Any other mismatch means ``F`` was edited by hand, and rollback refuses to overwrite it.

Every refusal is a :class:`~forge.errors.PromoteError` naming the file it is about
(the run's journal or ``run.json``, the target, the sidecar); nothing is written.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forge._util.digest import file_digest, sha256_hex
from forge._util.files import atomic_write_text, parse_yaml
from forge.bench.loader import Bench, load_bench
from forge.config.moves import Move, apply_move
from forge.config.registry import Config, Registry, load_config, load_registry
from forge.config.yaml_file import check_round_trip, first_difference, render_config, show_value
from forge.errors import MoveError, OptionError, PromoteError
from forge.journal import RunInfo, load_run, read_records
from forge.journal.lock import exclusive
from forge.journal.records import (
    AuxCheck,
    EndRecord,
    PromotedMove,
    SplitDelta,
)
from forge.journal.review import resolve_run, run_records
from forge.promotion.checks import (
    beyond_tolerance,
    check_unchanged,
    checked_test_delta,
    delta_text,
    replayed_chain,
    unscored_check,
)
from forge.promotion.provenance import (
    Promotion,
    Provenance,
    load_provenance,
    settle,
    sidecar_path,
    sidecar_text,
    write_sidecar,
)

__all__ = ["PromoteResult", "RollbackResult", "promote", "rollback"]


@dataclass(frozen=True)
class PromoteResult:
    """What ``promote`` did: the file, its sidecar, the new entry, and any notes."""

    target: Path
    sidecar: Path
    entry: Promotion
    notes: list[str] = field(default_factory=list)
    #: The test split's failure-share check, start to final (None: a run journaled
    #: before forge compared failure shares).
    unscored: AuxCheck | None = None

    def as_json(self) -> dict[str, Any]:
        unscored = None if self.unscored is None else self.unscored.model_dump(mode="json")
        return {"action": "promote", "target": str(self.target), "sidecar": str(self.sidecar),
                "notes": self.notes, **self.entry.as_json(), "unscored": unscored}


@dataclass(frozen=True)
class RollbackResult:
    """What ``rollback`` did. ``undone`` is None when there was nothing in effect to undo
    (only an unfinished promotion or rollback to clear from the sidecar: ``dropped``)."""

    target: Path
    sidecar: Path
    undone: Promotion | None
    dropped: Promotion | None
    remaining: int
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"action": "rollback", "target": str(self.target), "sidecar": str(self.sidecar),
                "undone": None if self.undone is None else self.undone.as_json(),
                "dropped": None if self.dropped is None else self.dropped.run_id,
                "remaining": self.remaining, "notes": self.notes}


# -- promote ---------------------------------------------------------------------------------

def promote(run: str, *, journals: Path = Path("journals"), to: Path | None = None,
            now: datetime | None = None, accept_beyond_tolerance: bool = False
            ) -> PromoteResult:
    """Write run ``run``'s final config as the new default, with provenance.

    The target is ``to`` or the bench's defaults file. Refuses (:class:`PromoteError`,
    nothing written) a run that is not finished, promoted nothing, has no test
    comparison or one that shows a loss, whose start-to-final check on test puts an
    auxiliary metric beyond its tolerance (unless ``accept_beyond_tolerance``: the
    sidecar then records which were accepted), whose bench or registry changed since,
    whose journal does not add up, or whose target no longer holds the run's start
    config.
    """
    folder = resolve_run(run, journals)
    info = load_run(folder)
    what = f"promote {info.run_id}"
    journal = folder / "journal.jsonl"
    records = run_records(folder, info, read_records(folder))
    end = records.end
    if end is None:
        raise PromoteError(f"{what}: refused: the run is not finished (its journal has no end "
                           f"record); finish it with `forge search --resume {info.run_id}`",
                           file=journal)
    if not end.promotions:
        raise PromoteError(f"{what}: refused: nothing to promote; the run promoted no move, "
                           "so its final config is its start config", file=journal)
    test = checked_test_delta(what, end, journal)
    beyond = beyond_tolerance(records.test)
    unscored = unscored_check(records.test)
    if beyond and not accept_beyond_tolerance:
        shown = "; ".join(f"{c.name}: {c.reason}" for c in beyond)
        raise PromoteError(f"{what}: refused: from the start config to the final one on test, "
                           f"{shown}; promote it anyway with --accept-beyond-tolerance",
                           file=journal, field=beyond[0].name)

    bench = load_bench(info.bench_path)
    check_unchanged(what, info, bench, folder / "run.json")
    registry = bench.registry
    inverses, start, final = replayed_chain(what, records, end, registry, journal)

    target = _target(what, bench, to)
    _refuse_read_only(what, target)
    evidence = _Evidence(what, info, bench, folder, end, test, inverses, start, final, beyond,
                         unscored)
    with _target_lock(what, target):
        return _promote_into(target, evidence, now)


@dataclass(frozen=True)
class _Evidence:
    """What :func:`promote` checked about the run, before it looks at the target."""

    what: str
    info: RunInfo
    bench: Bench
    folder: Path
    end: EndRecord
    test: SplitDelta
    inverses: list[Move]
    start: Config
    final: Config
    #: The test split's tolerance checks beyond their allowance, accepted by the user.
    beyond: list[AuxCheck]
    unscored: AuxCheck | None


def _promote_into(target: Path, run: _Evidence, now: datetime | None) -> PromoteResult:
    """The part of :func:`promote` that reads and writes the target, under its lock."""
    what, info, bench, folder, end = run.what, run.info, run.bench, run.folder, run.end
    test, inverses, start, final = run.test, run.inverses, run.start, run.final
    journal = folder / "journal.jsonl"
    registry = bench.registry
    notes: list[str] = []
    sidecar = sidecar_path(target)
    stack = load_provenance(sidecar).promotions if sidecar.exists() else []
    old_bytes = _read_bytes(target)
    old_sha = None if old_bytes is None else sha256_hex(old_bytes)
    stack, dropped = settle(stack, old_sha)
    notes += [] if dropped is None else [_dropped_note(dropped, target)]
    if old_bytes is None:
        order = list(registry.settings)
        previous = start
    else:
        current = load_config(target, registry)
        if stack and stack[-1].written_sha256 == old_sha and stack[-1].run_id == info.run_id:
            raise PromoteError(f"{what}: refused: already promoted to {target} (undo it with "
                               f"`forge rollback {target}`)", file=target)
        diff = first_difference(current.values, start.values)
        if diff is not None:
            key, now_value, start_value = diff
            raise PromoteError(f"{what}: refused: {target} was edited since the run started: "
                               f"{key} is {show_value(now_value)} there, the run started from "
                               f"{show_value(start_value)}; promote only onto the config a "
                               "run started from", file=target, field=key)
        order = list(parse_yaml(old_bytes.decode("utf-8")))
        previous = current

    at = now or datetime.now(UTC)
    text = render_config(final.values, registry, order=order,
                         header=_promote_header(info, end.promotions, test, target, at))
    previous_text = (old_bytes.decode("utf-8") if old_bytes is not None else render_config(
        previous.values, registry, order=order,
        header=[f"The previous default of {target.name}, restored by `forge rollback`: run "
                f"{info.run_id} started from it (the file did not exist before the run was "
                "promoted).", "Provenance: " + sidecar.name]))
    check_round_trip(text, final, registry, target)
    check_round_trip(previous_text, previous, registry, target)
    entry = Promotion(
        run_id=info.run_id, run_folder=str(folder.resolve()),
        journal_sha256=file_digest(journal), run_json_sha256=file_digest(folder / "run.json"),
        bench=bench.name, bench_path=str(bench.path), bench_digest=bench.digest,
        registry_path=str(_registry_path(bench)), registry_digest=registry.digest, test=test,
        moves=end.promotions, inverses=inverses, previous=previous.values,
        promoted=final.values, start_fingerprint=start.fingerprint,
        final_fingerprint=final.fingerprint, previous_existed=old_bytes is not None,
        previous_text=previous_text, previous_sha256=sha256_hex(previous_text),
        written_sha256=sha256_hex(text), at=at,
        accepted_beyond_tolerance=[c.name for c in run.beyond])
    provenance = Provenance(target=target.name, promotions=[*stack, entry])

    # Nothing is written until every check has passed. Re-read the target last: an
    # edit made while the checks ran must not be overwritten silently.
    if _read_bytes(target) != old_bytes:
        raise PromoteError(f"{what}: refused: {target} changed while promoting; try again",
                           file=target)
    notes += _remove_leftovers(target)
    _commit(target, text, sidecar, provenance, sidecar_first=True)
    return PromoteResult(target=target, sidecar=sidecar, entry=entry, notes=notes,
                         unscored=run.unscored)


def _target(what: str, bench: Bench, to: Path | None) -> Path:
    if to is None:
        if bench.spec.defaults is None:
            raise PromoteError(f"{what}: the bench names no defaults file; say where to write "
                               "with --to F", file=bench.path, field="defaults")
        return (bench.folder / bench.spec.defaults).resolve()
    if to.is_dir():
        raise OptionError(f"{to} is a folder; expected a file path ({what})", option="--to")
    return to


def _refuse_read_only(what: str, target: Path) -> None:
    """Refuse a target marked read-only. The atomic write replaces the file by renaming
    a new one over it, which a read-only file does not stop (only its folder's mode
    does), so without this check forge would overwrite a file its owner protected."""
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise PromoteError(f"{what}: cannot read {target.name}: {exc.strerror or exc}",
                           file=target) from None
    if not mode & 0o222 or not os.access(target, os.W_OK):
        raise PromoteError(f"{what}: refused: {target.name} is read-only; nothing was "
                           "written (make it writable to change it)", file=target)


def _registry_path(bench: Bench) -> Path:
    return (bench.folder / bench.spec.registry).resolve()


def _promote_header(info: RunInfo, moves: list[PromotedMove], test: SplitDelta, target: Path,
                    at: datetime) -> list[str]:
    lines = [f"Written by `forge promote` from run {info.run_id} (bench {info.bench}) at "
             f"{at.isoformat(timespec='seconds')}.",
             "Moves from the previous default, in order:"]
    lines += [f"  step {m.step}: {m.target}: {show_value(m.before)} -> {show_value(m.after)}"
              for m in moves]
    lines += [f"Test split: {delta_text(test)}.",
              f"Provenance: {sidecar_path(target).name}. `forge rollback {target.name}` "
              "undoes this promotion,",
              "and refuses once this file has been edited by hand."]
    return lines


# -- rollback --------------------------------------------------------------------------------

def rollback(target: str | Path) -> RollbackResult:
    """Restore ``target``'s default from before its last promotion.

    Applies the recorded inverses, last first, to the file's current config (a stale
    inverse is refused), checks that the result is the recorded previous config, then
    writes back the exact previous content. Refuses a file edited by hand since.
    """
    path = Path(target)
    what = f"rollback {path}"
    sidecar = sidecar_path(path)
    if not sidecar.exists() and not _target_lock_file(path).exists():
        raise PromoteError(f"{what}: no promotion is recorded for this file ({sidecar.name} "
                           "not found); nothing to roll back", file=path)
    _refuse_read_only(what, path)
    with _target_lock(what, path):
        return _rollback(path, what, sidecar)


def _finish_bookkeeping(path: Path, sidecar: Path, stack: list[Promotion],
                        dropped: Promotion) -> RollbackResult:
    """The file already holds the content from before ``dropped``: only the sidecar and
    any leftovers still say otherwise."""
    notes = _remove_leftovers(path)
    try:
        write_sidecar(sidecar, Provenance(target=path.name, promotions=stack))
    except OSError as exc:
        raise PromoteError(f"cannot write: {exc.strerror or exc}; the files were left as "
                           "they were", file=sidecar) from None
    return RollbackResult(target=path, sidecar=sidecar, undone=None, dropped=dropped,
                          remaining=len(stack), notes=notes)


def _refuse_unless_forge_wrote(what: str, path: Path, entry: Promotion,
                               current_sha: str | None) -> None:
    # Rolling back over a hand edit would silently throw the edit away.
    if current_sha is None:
        raise PromoteError(f"{what}: refused: the file is missing; it was removed since run "
                           f"{entry.run_id} was promoted", file=path)
    if current_sha != entry.written_sha256:
        raise PromoteError(f"{what}: refused: the file was edited by hand since run "
                           f"{entry.run_id} was promoted (its sha256 is not the one forge "
                           "wrote); restore forge's version or undo the change by hand",
                           file=path)


def _undo_moves(what: str, path: Path, registry: Registry, current: Config,
                entry: Promotion) -> Config:
    """``current`` with the promotion's recorded inverse moves applied, last first."""
    config = current
    for inverse in reversed(entry.inverses):
        try:
            config = apply_move(registry, config, inverse)
        except MoveError as exc:
            raise PromoteError(f"{what}: refused: {exc}", file=path) from None
    return config


def _rollback(path: Path, what: str, sidecar: Path) -> RollbackResult:
    """The part of :func:`rollback` that reads and writes the file, under its lock."""
    if not sidecar.exists():
        raise PromoteError(f"{what}: no promotion is recorded for this file ({sidecar.name} "
                           "not found); nothing to roll back", file=path)
    stack = load_provenance(sidecar).promotions
    current_bytes = _read_bytes(path)
    current_sha = None if current_bytes is None else sha256_hex(current_bytes)
    stack, dropped = settle(stack, current_sha)
    if dropped is not None:
        return _finish_bookkeeping(path, sidecar, stack, dropped)
    if not stack:
        raise PromoteError(f"{what}: nothing to roll back; {sidecar.name} records no "
                           "promotion in effect", file=sidecar)
    entry = stack[-1]
    _refuse_unless_forge_wrote(what, path, entry, current_sha)
    registry = load_registry(entry.registry_path)
    current = load_config(path, registry)
    if first_difference(current.values, entry.promoted) is not None:
        raise PromoteError(f"{what}: refused: {path} does not hold the config {sidecar.name} "
                           "says was promoted", file=path)
    config = _undo_moves(what, path, registry, current, entry)
    if first_difference(config.values, entry.previous) is not None:
        raise PromoteError(f"{what}: refused: undoing the recorded moves does not give the "
                           f"recorded previous config; {sidecar.name} is damaged", file=sidecar)
    check_round_trip(entry.previous_text, config, registry, path)
    provenance = Provenance(target=path.name, promotions=stack[:-1])
    notes = _remove_leftovers(path)
    # YAML first (the commit), then pop the entry: see the module docstring.
    _commit(path, entry.previous_text, sidecar, provenance, sidecar_first=False)
    return RollbackResult(target=path, sidecar=sidecar, undone=entry, dropped=None,
                          remaining=len(stack) - 1, notes=notes)


# -- files -----------------------------------------------------------------------------------

def _target_lock(what: str, target: Path) -> contextlib.AbstractContextManager[None]:
    """One promote or rollback of ``target`` at a time (a lock file beside it): the
    second comer is refused before it reads or writes anything."""
    def busy(holder: str) -> PromoteError:
        return PromoteError(f"{what}: refused: another forge promote or rollback of {target} "
                            f"is running ({holder}); nothing was written; try again when it "
                            "ends", file=target)

    def cannot(reason: str) -> PromoteError:
        return PromoteError(f"{what}: cannot lock {target.name}: {reason}", file=target)

    if not target.parent.is_dir():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise cannot(exc.strerror or str(exc)) from None
    return exclusive(_target_lock_file(target), busy=busy, cannot=cannot)


def _target_lock_file(target: Path) -> Path:
    return target.parent / f".{target.name}.lock"


def _remove_leftovers(target: Path) -> list[str]:
    """Remove the temporary files a killed promote or rollback left beside ``target``
    and its sidecar (:func:`forge._util.files.atomic_write_text` names them
    ``.NAME.<16 hex digits>.tmp``); only under the lock, when none can be in use."""
    names = {target.name, sidecar_path(target).name}
    pattern = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{16}\.tmp$")
    removed = 0
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return []
    for entry in entries:
        match = pattern.match(entry.name)
        if match and match.group("name") in names and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed += 1
    if not removed:
        return []
    return [f"removed {removed} temporary file(s) left beside {target.name} by an interrupted "
            "promote or rollback"]


def _dropped_note(entry: Promotion, target: Path) -> str:
    return (f"dropped the record of run {entry.run_id}'s promotion from "
            f"{sidecar_path(target).name}: {target.name} holds the content from before it "
            "(an interrupted promote or rollback)")


def _commit(target: Path, text: str, sidecar: Path, provenance: Provenance, *,
            sidecar_first: bool) -> None:
    """Write ``target`` and the sidecar in the order the module docstring explains.

    When the second write fails, the first file is put back, so a failed command
    changes nothing; if even that fails, the files are in a state
    :func:`forge.promotion.provenance.settle` recognises. OS errors become one line.
    """
    first, second = (sidecar, sidecar_text(provenance)), (target, text)
    if not sidecar_first:
        first, second = second, first
    old_first = _read_bytes(first[0])
    atomic = "the files were left as they were"
    try:
        atomic_write_text(*first)
    except OSError as exc:
        raise PromoteError(f"cannot write: {exc.strerror or exc}; {atomic}",
                           file=first[0]) from None
    try:
        atomic_write_text(*second)
    except BaseException as exc:
        try:
            _restore(first[0], old_first)
        except OSError:
            atomic = (f"{first[0]} was written but {second[0]} was not; the next promote or "
                      "rollback of this file resolves it")
        if isinstance(exc, OSError):
            raise PromoteError(f"cannot write: {exc.strerror or exc}; {atomic}",
                               file=second[0]) from None
        raise


def _restore(path: Path, content: bytes | None) -> None:
    if content is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write_text(path, content.decode("utf-8"))


def _read_bytes(path: Path) -> bytes | None:
    """The file's exact bytes (hashes are over bytes: no newline translation), or None."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise PromoteError("is a folder; expected a config file", file=path) from None
    except OSError as exc:
        raise PromoteError(f"cannot read: {exc.strerror or exc}", file=path) from None
