"""Promote a finished search run's final config as the new default, and roll it back.

Two files describe a promoted default ``F``:

* ``F`` itself stays a plain YAML mapping ``setting: value`` that
  :func:`forge.registry.load_config` reads unchanged. forge writes it with a header
  comment naming the run, its moves and its test result (comments change neither
  the values nor any digest).
* ``F.forge.json`` (the *sidecar*, see :func:`sidecar_path`) holds the provenance: a
  stack of :class:`Promotion` entries, oldest first. Each one records the run, the
  sha256 of its journal, the bench and registry digests, the test comparison, the
  chain of moves with their inverses, the config values before and after, the exact
  previous file content, and the sha256 of the content forge wrote.

Crash consistency. Every write is atomic (:func:`forge._files.atomic_write_text`),
but two files cannot be replaced at once, so the YAML file is the truth and the
sidecar's top entry is *in effect* only while ``F``'s sha256 equals the entry's
``written_sha256``:

* ``promote`` writes the sidecar first (an intent record) and the YAML last (the
  commit). A crash between the two leaves ``F`` holding its previous content.
* ``rollback`` writes the YAML first (the commit) and pops the sidecar entry last.
  A crash between the two leaves ``F`` holding the entry's previous content too.

So in both cases the top entry describes a change that ``F`` does not show, while
``F`` holds exactly that entry's previous content; every later ``promote`` or
``rollback`` recognises this (:func:`_settle`) and drops the entry. Any other
mismatch means ``F`` was edited by hand, and rollback refuses to overwrite it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic import ValidationError as PydanticValidationError

from forge._digest import file_digest, sha256_hex
from forge._files import atomic_write_text, parse_yaml
from forge.bench import Bench, load_bench
from forge.errors import ConfigError, ForgeError, UserError
from forge.journal import RunInfo, load_run, read_records
from forge.moves import Move, apply_move
from forge.registry import Config, Registry, load_config, load_registry, same_value

__all__ = [
    "PROVENANCE_FORMAT_VERSION",
    "SIDECAR_SUFFIX",
    "PromoteResult",
    "Promotion",
    "PromotionMove",
    "Provenance",
    "RollbackResult",
    "promote",
    "render_config",
    "rollback",
    "sidecar_path",
]

PROVENANCE_FORMAT_VERSION = 1
SIDECAR_SUFFIX = ".forge.json"

# Strict members: a JSON ``1`` must come back as the int 1, never as True or 1.0.
_Value = StrictBool | StrictInt | StrictFloat | StrictStr


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PromotionMove(_Strict):
    """One promoted move of the run, as its journal's end record lists it."""

    step: int
    target: str
    before: _Value
    after: _Value

    def as_move(self) -> Move:
        return Move(target=self.target, before=self.before, after=self.after)


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
    test: dict[str, float | None] = Field(description="start, final, delta, ci_low, ci_high")
    moves: list[PromotionMove] = Field(min_length=1,
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

    def holds_previous(self, sha: str | None) -> bool:
        """Whether a file with content ``sha`` (None: no file) is this entry's before-state."""
        return sha == self.previous_sha256 or (sha is None and not self.previous_existed)


class Provenance(_Strict):
    """The sidecar file: the promotions of one file, oldest first; the last is in effect."""

    format_version: int = PROVENANCE_FORMAT_VERSION
    target: str = Field(description="the file this sidecar describes (its name)")
    promotions: list[Promotion] = Field(default_factory=list)


@dataclass(frozen=True)
class PromoteResult:
    """What ``promote`` did: the file, its sidecar, the new entry, and any notes."""

    target: Path
    sidecar: Path
    entry: Promotion
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"action": "promote", "target": str(self.target), "sidecar": str(self.sidecar),
                "notes": self.notes, **_entry_json(self.entry)}


@dataclass(frozen=True)
class RollbackResult:
    """What ``rollback`` did. ``undone`` is None when there was nothing in effect to undo
    (only an unfinished promotion or rollback to clear from the sidecar: ``dropped``)."""

    target: Path
    sidecar: Path
    undone: Promotion | None
    dropped: Promotion | None
    remaining: int

    def as_json(self) -> dict[str, Any]:
        return {"action": "rollback", "target": str(self.target), "sidecar": str(self.sidecar),
                "undone": None if self.undone is None else _entry_json(self.undone),
                "dropped": None if self.dropped is None else self.dropped.run_id,
                "remaining": self.remaining}


def _entry_json(entry: Promotion) -> dict[str, Any]:
    """An entry for ``--json`` output; the previous file text stays in the sidecar."""
    return entry.model_dump(mode="json", exclude={"previous_text"})


def sidecar_path(target: str | Path) -> Path:
    """``registry/triage.defaults.yaml`` -> ``registry/triage.defaults.yaml.forge.json``."""
    p = Path(target)
    return p.with_name(p.name + SIDECAR_SUFFIX)


# -- promote ---------------------------------------------------------------------------------

def promote(run: str, *, journals: Path = Path("journals"), to: Path | None = None,
            now: datetime | None = None) -> PromoteResult:
    """Write run ``run``'s final config as the new default, with provenance.

    The target is ``to`` or the bench's defaults file. Refuses (:class:`UserError`,
    nothing written) a run that is not finished, promoted nothing, has no test
    comparison or one that shows a loss, whose bench or registry changed since, whose
    journal does not add up, or whose target no longer holds the run's start config.
    """
    folder = _run_folder(run, journals)
    info = load_run(folder)
    what = f"promote {info.run_id}"
    records = read_records(folder)
    end = next((r for r in reversed(records) if r.get("kind") == "end"), None)
    if end is None:
        raise UserError(f"{what}: refused: the run is not finished (its journal has no end "
                        f"record); finish it with `forge search --resume {info.run_id}`")
    if not end.get("promotions"):
        raise UserError(f"{what}: refused: nothing to promote; the run promoted no move, so "
                        "its final config is its start config")
    test = _test_block(what, end)

    bench = load_bench(info.bench_path)
    _check_unchanged(what, info, bench)
    registry = bench.registry
    moves, inverses, start, final = _chain(what, info, records, end, registry)

    target = _target(what, bench, to)
    sidecar = sidecar_path(target)
    stack = _load_provenance(sidecar, target).promotions if sidecar.exists() else []
    old_bytes = _read_bytes(target)
    old_sha = None if old_bytes is None else sha256_hex(old_bytes)
    stack, dropped = _settle(stack, old_sha)
    notes = [] if dropped is None else [_dropped_note(dropped, target)]
    if old_bytes is None:
        order = list(registry.settings)
        previous = start
    else:
        current = load_config(target, registry)
        if stack and stack[-1].written_sha256 == old_sha and stack[-1].run_id == info.run_id:
            raise UserError(f"{what}: refused: already promoted to {target} (undo it with "
                            f"`forge rollback {target}`)")
        diff = _first_difference(current.values, start.values)
        if diff is not None:
            key, now_value, start_value = diff
            raise UserError(f"{what}: refused: {target} was edited since the run started: "
                            f"{key} is {_show(now_value)} there, the run started from "
                            f"{_show(start_value)}; promote only onto the config a run "
                            "started from")
        order = list(parse_yaml(old_bytes.decode("utf-8")))
        previous = current

    at = now or datetime.now(UTC)
    text = render_config(final.values, registry, order=order,
                         header=_promote_header(info, moves, test, target, at))
    previous_text = (old_bytes.decode("utf-8") if old_bytes is not None else render_config(
        previous.values, registry, order=order,
        header=[f"The previous default of {target.name}, restored by `forge rollback`: run "
                f"{info.run_id} started from it (the file did not exist before the run was "
                "promoted).", "Provenance: " + sidecar.name]))
    _check_round_trip(text, final, registry, target)
    _check_round_trip(previous_text, previous, registry, target)
    entry = Promotion(
        run_id=info.run_id, run_folder=str(folder.resolve()),
        journal_sha256=file_digest(folder / "journal.jsonl"),
        run_json_sha256=file_digest(folder / "run.json"),
        bench=bench.name, bench_path=str(bench.path), bench_digest=bench.digest,
        registry_path=str(_registry_path(bench)), registry_digest=registry.digest, test=test,
        moves=moves, inverses=inverses, previous=previous.values, promoted=final.values,
        start_fingerprint=start.fingerprint, final_fingerprint=final.fingerprint,
        previous_existed=old_bytes is not None, previous_text=previous_text,
        previous_sha256=sha256_hex(previous_text), written_sha256=sha256_hex(text), at=at)
    provenance = Provenance(target=target.name, promotions=[*stack, entry])

    # Nothing is written until every check has passed. Re-read the target last: an
    # edit made while the checks ran must not be overwritten silently.
    if _read_bytes(target) != old_bytes:
        raise UserError(f"{what}: refused: {target} changed while promoting; try again")
    _commit(target, text, sidecar, provenance, sidecar_first=True)
    return PromoteResult(target=target, sidecar=sidecar, entry=entry, notes=notes)


def _run_folder(run: str, journals: Path) -> Path:
    """``RUN`` is a run id under ``journals``, or the path of a run folder."""
    folder = journals / run
    if not (folder / "run.json").exists() and (Path(run) / "run.json").exists():
        return Path(run)
    return folder


def _test_block(what: str, end: dict[str, Any]) -> dict[str, float | None]:
    """The run's start-vs-final comparison on the test split; refuses none, or a loss."""
    test = end.get("test") or {}
    delta = test.get("delta")
    if not isinstance(delta, (int, float)) or isinstance(delta, bool) or math.isnan(delta):
        raise UserError(f"{what}: refused: the run has no test comparison (the test split "
                        "was not evaluated), so the gain was never checked out of sample")
    if delta < 0:
        raise UserError(f"{what}: refused: the test comparison shows a loss: "
                        f"{_test_text(test)}")
    return {k: test.get(k) for k in ("start", "final", "delta", "ci_low", "ci_high")}


def _check_unchanged(what: str, info: RunInfo, bench: Bench) -> None:
    """The evidence is about the bench and registry the run used; refuse if they changed."""
    # The bench digest covers the registry too: check the registry first, to name it.
    if bench.registry.digest != info.registry_digest:
        raise UserError(f"{what}: refused: the registry of {bench.path} changed since the run "
                        f"(digest {bench.registry.digest[:12]}, the run used "
                        f"{info.registry_digest[:12]})")
    if bench.digest != info.bench_digest:
        raise UserError(f"{what}: refused: the bench {bench.path} (its file, tasks, harness or "
                        f"scorer code) changed since the run (digest {bench.digest[:12]}, the "
                        f"run used {info.bench_digest[:12]})")


def _chain(what: str, info: RunInfo, records: list[dict[str, Any]], end: dict[str, Any],
           registry: Registry) -> tuple[list[PromotionMove], list[Move], Config, Config]:
    """The promoted moves, their inverses, and the start and final configs, cross-checked.

    The end record's list, the promoted step records and their recorded inverses must
    agree, and replaying the moves on the start config must give the final config:
    a journal that does not add up is not promoted.
    """
    def broken(why: str) -> UserError:
        return UserError(f"{what}: refused: the run's journal does not add up: {why}")

    if end.get("run_id") != info.run_id:
        raise broken(f"its end record is for run {end.get('run_id')!r}")
    try:
        moves = [PromotionMove.model_validate(p) for p in end["promotions"]]
        steps = [r for r in records
                 if r.get("kind") == "candidate" and r.get("verdict") == "promoted"]
        recorded = [Move.model_validate(r["move"]) for r in steps]
        inverses = [Move.model_validate(r["inverse"]) for r in steps]
    except (KeyError, TypeError, PydanticValidationError) as exc:
        raise broken(f"a promotion record is malformed ({type(exc).__name__})") from None
    if recorded != [m.as_move() for m in moves] or [r.get("step") for r in steps] != [
            m.step for m in moves]:
        raise broken("the promoted steps differ from the end record's promotions")
    for move, inverse in zip(recorded, inverses, strict=True):
        if inverse != move.inverse():
            raise broken(f"the recorded inverse of {move} is {inverse}")
    start = registry.validate_config(info.start_config, file=Path(info.bench_path))
    if start.fingerprint != info.start_fingerprint:
        raise broken("the start config's fingerprint differs from run.json")
    config = start
    for move in recorded:
        try:
            config = apply_move(registry, config, move)
        except UserError as exc:
            raise broken(str(exc)) from None
    if (_first_difference(config.values, end.get("final_config") or {}) is not None
            or config.fingerprint != end.get("final_fingerprint")):
        raise broken("replaying its moves on the start config does not give its final config")
    return moves, inverses, start, config


def _target(what: str, bench: Bench, to: Path | None) -> Path:
    if to is None:
        if bench.spec.defaults is None:
            raise UserError(f"{what}: the bench {bench.path} names no defaults file; "
                            "say where to write with --to F")
        return (bench.folder / bench.spec.defaults).resolve()
    if to.is_dir():
        raise UserError(f"{what}: --to {to} is a folder; expected a file path")
    return to


def _registry_path(bench: Bench) -> Path:
    return (bench.folder / bench.spec.registry).resolve()


def _promote_header(info: RunInfo, moves: list[PromotionMove], test: dict[str, float | None],
                    target: Path, at: datetime) -> list[str]:
    lines = [f"Written by `forge promote` from run {info.run_id} (bench {info.bench}) at "
             f"{at.isoformat(timespec='seconds')}.",
             "Moves from the previous default, in order:"]
    lines += [f"  step {m.step}: {m.target}: {_show(m.before)} -> {_show(m.after)}"
              for m in moves]
    lines += [f"Test split: {_test_text(test)}.",
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
    if not sidecar.exists():
        raise UserError(f"{what}: no promotion is recorded for this file ({sidecar.name} not "
                        "found); nothing to roll back")
    stack = _load_provenance(sidecar, path).promotions
    current_bytes = _read_bytes(path)
    current_sha = None if current_bytes is None else sha256_hex(current_bytes)
    stack, dropped = _settle(stack, current_sha)
    if dropped is not None:
        # F already holds the content from before that entry: finish the bookkeeping only.
        provenance = Provenance(target=path.name, promotions=stack)
        _write_sidecar(sidecar, provenance)
        return RollbackResult(target=path, sidecar=sidecar, undone=None, dropped=dropped,
                              remaining=len(stack))
    if not stack:
        raise UserError(f"{what}: nothing to roll back; {sidecar.name} records no promotion "
                        "in effect")
    entry = stack[-1]
    if current_bytes is None:
        raise UserError(f"{what}: refused: the file is missing; it was removed since run "
                        f"{entry.run_id} was promoted")
    if current_sha != entry.written_sha256:
        raise UserError(f"{what}: refused: the file was edited by hand since run "
                        f"{entry.run_id} was promoted (its sha256 is not the one forge "
                        "wrote); restore forge's version or undo the change by hand")
    registry = load_registry(entry.registry_path)
    current = load_config(path, registry)
    if _first_difference(current.values, entry.promoted) is not None:
        raise UserError(f"{what}: refused: {path} does not hold the config {sidecar.name} "
                        "says was promoted")
    config = current
    for inverse in reversed(entry.inverses):
        try:
            config = apply_move(registry, config, inverse)
        except UserError as exc:
            raise UserError(f"{what}: refused: {exc}") from None
    if _first_difference(config.values, entry.previous) is not None:
        raise UserError(f"{what}: refused: undoing the recorded moves does not give the "
                        f"recorded previous config; {sidecar.name} is damaged")
    _check_round_trip(entry.previous_text, config, registry, path)
    provenance = Provenance(target=path.name, promotions=stack[:-1])
    # YAML first (the commit), then pop the entry: see the module docstring.
    _commit(path, entry.previous_text, sidecar, provenance, sidecar_first=False)
    return RollbackResult(target=path, sidecar=sidecar, undone=entry, dropped=None,
                          remaining=len(stack) - 1)


# -- files -----------------------------------------------------------------------------------

def _settle(stack: list[Promotion], sha: str | None) -> tuple[list[Promotion], Promotion | None]:
    """Drop the top entry when the file holds that entry's previous content.

    That is the trace of a promote stopped before its YAML write, or of a rollback
    stopped before its sidecar write (and of a file put back by hand to its content
    from before the promotion): in every case the entry is not in effect.
    """
    if stack and stack[-1].written_sha256 != sha and stack[-1].holds_previous(sha):
        return stack[:-1], stack[-1]
    return stack, None


def _dropped_note(entry: Promotion, target: Path) -> str:
    return (f"dropped the record of run {entry.run_id}'s promotion from "
            f"{sidecar_path(target).name}: {target.name} holds the content from before it "
            "(an interrupted promote or rollback)")


def _commit(target: Path, text: str, sidecar: Path, provenance: Provenance, *,
            sidecar_first: bool) -> None:
    """Write ``target`` and the sidecar in the order the module docstring explains.

    When the second write fails, the first file is put back, so a failed command
    changes nothing; if even that fails, the files are in a state :func:`_settle`
    recognises. OS errors become one line.
    """
    first, second = ((sidecar, provenance.model_dump_json(indent=2) + "\n"), (target, text))
    if not sidecar_first:
        first, second = second, first
    old_first = _read_bytes(first[0])
    atomic = "the files were left as they were"
    try:
        atomic_write_text(*first)
    except OSError as exc:
        raise UserError(f"cannot write {first[0]}: {exc.strerror or exc}; {atomic}") from None
    try:
        atomic_write_text(*second)
    except BaseException as exc:
        try:
            _restore(first[0], old_first)
        except OSError:
            atomic = (f"{first[0]} was written but {second[0]} was not; the next promote or "
                      "rollback of this file resolves it")
        if isinstance(exc, OSError):
            raise UserError(f"cannot write {second[0]}: {exc.strerror or exc}; {atomic}"
                            ) from None
        raise


def _restore(path: Path, content: bytes | None) -> None:
    if content is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write_text(path, content.decode("utf-8"))


def _write_sidecar(sidecar: Path, provenance: Provenance) -> None:
    atomic_write_text(sidecar, provenance.model_dump_json(indent=2) + "\n")


def _load_provenance(sidecar: Path, target: Path) -> Provenance:
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{sidecar}: cannot read the provenance of {target.name}: {exc}; "
                        "forge will not overwrite it") from None
    version = data.get("format_version") if isinstance(data, dict) else None
    if version != PROVENANCE_FORMAT_VERSION or isinstance(version, bool):
        raise UserError(f"{sidecar}: format_version {version!r} is not readable by this forge, "
                        f"which reads {PROVENANCE_FORMAT_VERSION}")
    try:
        return Provenance.model_validate(data)
    except PydanticValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UserError(f"{sidecar}: {where}: damaged provenance: {first['msg']}") from None


def _read_bytes(path: Path) -> bytes | None:
    """The file's exact bytes (hashes are over bytes: no newline translation), or None."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise UserError(f"{path} is a folder; expected a config file") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None


# -- rendering -------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def render_config(values: Mapping[str, Any], registry: Registry, *,
                  order: Sequence[str] | None = None, header: Sequence[str] = ()) -> str:
    """A config as YAML that every YAML reader reads back to exactly ``values``.

    ``order`` (by default the registry's) decides the key order; keys it misses follow
    in registry order. Strings are always double-quoted, so ``"1e3"`` or ``"on"``
    stay strings; floats always carry a dot and a signed exponent, so YAML 1.1
    readers (plain PyYAML) and forge's YAML 1.2 reader both see a float.
    """
    keys = [k for k in (order or []) if k in values]
    keys += [k for k in registry.settings if k in values and k not in keys]
    keys += [k for k in values if k not in keys]
    lines = [_comment(h) for h in header]
    lines += [f"{_key_text(k)}: {_value_text(values[k])}" for k in keys]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    # One physical line per header line, whatever a run id or bench name holds.
    return "# " + " ".join(text.split("\n")) if text.strip() else "#"


def _key_text(key: str) -> str:
    if _PLAIN_KEY.match(key) and parse_yaml(key) == key and yaml.safe_load(key) == key:
        return key  # plain only when both YAML 1.1 and 1.2 read it as this string
    return _quoted(key)


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ForgeError(f"cannot promote a non-finite float {value!r}")
        text = repr(value)
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return mantissa + ("e" + exponent if exponent else "")
    if isinstance(value, str):
        return _quoted(value)
    raise ForgeError(f"cannot write a config value of type {type(value).__name__}")


def _quoted(text: str) -> str:
    # PyYAML's emitter escapes what a double-quoted scalar must escape; no line folding.
    out: str = yaml.safe_dump(text, default_style='"', allow_unicode=True, width=math.inf)
    return out.rstrip("\n")


def _check_round_trip(text: str, expected: Config, registry: Registry, target: Path) -> None:
    """What forge writes must load back to exactly the config it means: checked before
    anything is replaced, the way ``load_config`` will read it."""
    try:
        data = parse_yaml(text)
        loaded = registry.validate_config(data, file=target)
    except (yaml.YAMLError, ConfigError) as exc:
        raise ForgeError(f"{target}: the text to write does not load back ({exc}); "
                         "nothing was written") from None
    if (_first_difference(loaded.values, expected.values) is not None
            or any(type(loaded.values[k]) is not type(v) for k, v in expected.values.items())):
        raise ForgeError(f"{target}: the text to write loads back to another config; "
                         "nothing was written")


# -- text --------------------------------------------------------------------------------------

def _first_difference(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """The first key (in ``a``'s order, then ``b``'s) whose values differ, or None."""
    for key in [*a, *(k for k in b if k not in a)]:
        if key not in a or key not in b or not same_value(a[key], b[key]):
            return key, a.get(key, "(missing)"), b.get(key, "(missing)")
    return None


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True)


def _test_text(test: dict[str, Any]) -> str:
    def num(x: Any, sign: bool = False) -> str:
        return "—" if x is None else (f"{x:+.3f}" if sign else f"{x:.3f}")

    ci = ("" if test.get("ci_low") is None or test.get("ci_high") is None
          else f" (95% CI {num(test['ci_low'], True)} .. {num(test['ci_high'], True)})")
    return (f"{num(test.get('start'))} -> {num(test.get('final'))}, "
            f"delta {num(test.get('delta'), True)}{ci}")
