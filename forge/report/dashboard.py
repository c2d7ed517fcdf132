"""The run's Optuna study for people: ``optuna-dashboard journals/<run>/optuna.journal``.

The study holds one trial per config the search evaluated, written from its journal
records as they are written (it subscribes to the run's
:class:`~forge.journal.run_store.RunStore`: :meth:`DashboardStudy.on_record`), into
the study ``"forge"`` of the run's ``optuna.journal``:

- the start config: COMPLETE, value 0;
- each promoted config: COMPLETE, value its incumbent's value plus the gain its
  confirmation measured (the paired mean of candidate minus incumbent on the tasks
  and attempts the confirmation read, none of which chose it). The value is the gain
  in mean score over the start config along the chain of promotions; each gain passed
  a one-sided test against ``min_effect >= 0``, so it is positive and the final
  config is the study's best trial by construction;
- a candidate refused by a confirmation gate (dev, val, a tolerance, a floor): FAIL;
- a candidate screened out, or that passed screening and was not confirmed: PRUNED.

Refused candidates carry no value: what screening measured of them (a few tasks,
the data that selected them) is not comparable to a confirmed gain, and a value
would make one of them the dashboard's "best trial". What the search made of each
trial is in its user attributes: the journal line, step, move, verdict, the
screening and confirmation statistics, every gate and the one that failed.

Nothing here feeds a decision: the Optuna proposer keeps its own model in memory
(:mod:`forge.proposers.optuna_ranked`). The study is a function of the journal, so a
resumed search, which replays its records in order, writes only the trials of records
whose journal line has none yet: no duplicates, and none lost to a kill between a
record and its trial. A study written by an earlier forge (the proposer's first-chunk
trials, no ``format_version``) is replaced on resume.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import FrozenTrial, TrialState

from forge.config.optuna_space import encode_values, optuna_param, quiet_optuna
from forge.config.registry import Registry, Scalar
from forge.journal.jsonl import cut_torn_tail
from forge.journal.records import AnyRecord, CandidateRecord, EndRecord, SplitDelta, StartRecord
from forge.secrets.masking import clip, redact

__all__ = ["OBJECTIVE", "STUDY_FILE", "STUDY_FORMAT", "STUDY_NAME", "DashboardStudy"]

log = logging.getLogger(__name__)

STUDY_FILE = "optuna.journal"
STUDY_NAME = "forge"
#: The shape of the study's trials. 1 (no ``format_version`` attribute): every screened
#: config COMPLETE, valued by its first dev chunk's mean; 2: this module's.
STUDY_FORMAT = 2
#: The objective's name, as the dashboard labels it.
OBJECTIVE = "gain over start"
_OBJECTIVE_TEXT = ("value: gain in mean score over the start config, the sum of the gains "
                   "each promotion's confirmation measured (start 0; only the start and "
                   "promoted configs have one). FAIL: refused by a confirmation gate; "
                   "PRUNED: screened out, or not confirmed")
_TEXT = 300  # longest reason kept in a user attribute


@dataclass(frozen=True)
class _Kept:
    """The start or a promoted config: what its successors' trials build on."""

    values: dict[str, Scalar]
    value: float
    number: int  # its trial's number


class DashboardStudy:
    """Writes the trials of a run's records to ``folder/optuna.journal``, study ``forge``.

    :meth:`on_record` is told every record the search journals, in order (on resume,
    the replayed ones too), and numbers them by their 1-based line in
    ``journal.jsonl``; :meth:`add` takes a record with its line. A record gets its
    trial once (by ``journal_line``).
    """

    def __init__(self, folder: Path, registry: Registry) -> None:
        self.path = folder / STUDY_FILE
        self._params = {name: optuna_param(s) for name, s in registry.settings.items()}
        self._configs: dict[str, _Kept] = {}
        self._count = 0  # trials the records so far make: the next one's number
        self._lines = 0  # records told so far (on_record): the journal line of the last
        self._last_at: datetime | None = None
        # A kill mid-append leaves a torn line that the next append would run into.
        cut_torn_tail(self.path)
        storage = JournalStorage(JournalFileBackend(str(self.path)))
        with quiet_optuna():
            self.study = self._open(storage, self.path)
        self._written = {t.user_attrs.get("journal_line")
                         for t in self.study.get_trials(deepcopy=False)}

    @staticmethod
    def _open(storage: JournalStorage, path: Path) -> optuna.Study:
        if STUDY_NAME in optuna.get_all_study_names(storage):
            study = optuna.load_study(study_name=STUDY_NAME, storage=storage)
            if study.user_attrs.get("format_version") == STUDY_FORMAT:
                return study
            # Another shape (an earlier forge's): the replay rewrites every trial.
            log.info("%s: replacing study %r, of an earlier format", path, STUDY_NAME)
            optuna.delete_study(study_name=STUDY_NAME, storage=storage)
        study = optuna.create_study(storage=storage, study_name=STUDY_NAME,
                                    direction="maximize")
        study.set_metric_names([OBJECTIVE])
        study.set_user_attr("objective", _OBJECTIVE_TEXT)
        # Last: a study without it (killed while being made) is made again.
        study.set_user_attr("format_version", STUDY_FORMAT)
        return study

    def on_record(self, record: AnyRecord) -> None:
        """The trial of the next record of the journal, if it has one."""
        self._lines += 1
        self.add(record, self._lines)

    def add(self, record: AnyRecord, line: int) -> None:
        """The trial of ``record`` (journal line ``line``), if it has one."""
        if isinstance(record, StartRecord):
            self._start(record, line)
        elif isinstance(record, CandidateRecord):
            self._candidate(record, line)
        elif isinstance(record, EndRecord):
            self._end(record)
        if record.at is not None:
            self._last_at = record.at

    def _start(self, record: StartRecord, line: int) -> None:
        values = dict(record.config)
        self._configs[record.fingerprint] = _Kept(values, 0.0, self._count)
        self._write(record, line, TrialState.COMPLETE, values, 0.0, {
            "step": 0, "verdict": "start", "fingerprint": record.fingerprint,
            "dev_mean": record.dev_mean, "dev_tasks": record.dev_tasks})

    def _candidate(self, record: CandidateRecord, line: int) -> None:
        incumbent = self._configs.get(record.incumbent)
        if record.candidate is None or record.dev is None or incumbent is None:
            return  # nothing evaluated: an illegal move, or one tried already
        values = {**incumbent.values, record.move.target: record.move.after}
        value: float | None = None
        attrs = _attrs(record)
        attrs["incumbent_trial"] = incumbent.number
        if record.verdict == "promoted":
            state = TrialState.COMPLETE
            gain = _gain(record)
            value = incumbent.value + gain
            attrs["gain"] = gain
            self._configs[record.candidate] = _Kept(values, value, self._count)
        elif record.verdict == "rejected" and record.dev.screen.status == "pass":
            state = TrialState.FAIL  # passed screening: a confirmation gate refused it
        else:
            state = TrialState.PRUNED
        self._write(record, line, state, values, value, attrs)

    def _write(self, record: AnyRecord, line: int, state: TrialState,
               values: dict[str, Scalar], value: float | None,
               attrs: dict[str, Any]) -> None:
        number = self._count
        self._count += 1
        if line in self._written:
            return
        params, distributions = encode_values(self._params, values)
        # The evaluation's span: from the record before to this one (the journal's clock,
        # which a replay keeps).
        end = record.at or datetime.now().astimezone()
        trial = FrozenTrial(
            number=number, state=state, value=value, datetime_start=self._last_at or end,
            datetime_complete=end, params=params, distributions=distributions,
            user_attrs={"journal_line": line,
                        **{k: v for k, v in attrs.items() if v is not None}},
            system_attrs={}, intermediate_values={}, trial_id=number)
        with quiet_optuna():
            self.study.add_trial(trial)
        self._written.add(line)

    def _end(self, record: EndRecord) -> None:
        final = self._configs.get(record.final_fingerprint)
        attrs: dict[str, Any] = {
            "final_trial": None if final is None else final.number,
            "final_config": record.final_config, "stop_reason": record.stop_reason,
            "promotions": len(record.promotions),
            **{f"start_to_final_{split}": _delta(block) for split, block in
               (("dev", record.dev), ("val", record.val), ("test", record.test))
               if block.compared}}
        with quiet_optuna():
            stored = self.study.user_attrs
            for key, value in attrs.items():
                if stored.get(key) != value:  # a replayed end writes nothing again
                    self.study.set_user_attr(key, value)


def _gain(record: CandidateRecord) -> float:
    """The gain a promotion's confirmation measured: its improvement test's mean paired
    delta (candidate minus incumbent), over dev, or dev and val where it pools them."""
    dev = record.dev
    if dev is not None and dev.confirm is not None:
        return float(dev.confirm.effect)
    if dev is not None and dev.before is not None and dev.after is not None:
        return float(dev.after) - float(dev.before)
    return 0.0


def _short(text: str | None) -> str | None:
    """``text`` as a trial attribute: redacted, and cut to ``_TEXT`` characters with its
    marker (the study file is read by another program, which masks nothing)."""
    if text is None:
        return None
    return redact(text) if len(text) <= _TEXT else clip(text, _TEXT - 3)


def _num(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def _attrs(record: CandidateRecord) -> dict[str, Any]:
    """What a person needs to read a candidate's trial without the journal open."""
    move = record.move
    out: dict[str, Any] = {
        "step": record.step, "verdict": record.verdict,
        "move": f"{move.target}: {move.before!r} -> {move.after!r}",
        "move_kind": record.move_kind, "proposer": record.proposer,
        "reason": _short(record.reason), "fingerprint": record.candidate,
        "precision_round": record.precision_round, "rollouts": record.rollouts,
        "why": _short(record.why), "deferred": _short(record.deferred)}
    dev = record.dev
    if dev is not None:
        screen = dev.screen
        out |= {"screen": screen.status, "screen_effect": _num(screen.effect),
                "screen_p": _num(screen.p_value), "screen_tasks": screen.n_tasks}
        if dev.confirm is not None:
            c = dev.confirm
            out |= {"confirm_effect": _num(c.effect), "confirm_p": _num(c.p_value),
                    "confirm_ci_low": _num(c.ci_low), "confirm_level": _num(c.level),
                    "confirm_tasks": c.n_tasks,
                    "confirm_on": "+".join(c.splits) if c.splits else "dev",
                    "looks": record.looks}
        out |= {"dev_before": _num(dev.before), "dev_after": _num(dev.after)}
    if record.val is not None:
        v = record.val
        out |= {"val_effect": _num(v.effect), "val_p": _num(v.p_value),
                "val_before": _num(v.before), "val_after": _num(v.after)}
    if record.gates:
        out["gates"] = "; ".join(f"{g.name} {'passed' if g.passed else 'failed'}"
                                 for g in record.gates)
        failing = next((g for g in record.gates if not g.passed), None)
        if failing is not None:
            out |= {"failing_gate": failing.name, "failing_reason": _short(failing.reason)}
        # Each gate's own sentence: the effect or regression, its bound, the allowance.
        out |= {f"gate {g.name}": _short(f"{'passed' if g.passed else 'failed'}: {g.reason}")
                for g in record.gates}
    if record.gates_not_run:
        out["gates_not_run"] = ", ".join(record.gates_not_run)
    return out


def _delta(block: SplitDelta) -> dict[str, float | None]:
    return {k: _num(v) for k, v in block.as_json().items()}
