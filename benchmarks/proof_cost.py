"""The cost of proof (issue 51, item 1): where a search's rollouts go, and how far each
proven promotion is from the fixed-sample size its true effect needs.

    python benchmarks/proof_cost.py --workers 2                  # both benches, 20 seeds
    python benchmarks/proof_cost.py --seeds 5 --budgets 2000     # a quick look
    python benchmarks/proof_cost.py --seeds-at 20000=10          # fewer seeds at 20k
    python benchmarks/proof_cost.py --rerender                   # tables from the cache

**Searches.** On the closed-form benches (``closedform``, ``sparse``: truth exact), a
seeded forge search per (bench, budget, seed), as ``benchmarks/quality.py`` runs
forge-auto: ``launch_search(..., proposer="auto", budget_rollouts=B)`` with
``max_steps``/``patience`` out of reach (``quality.UNBOUNDED_STEPS``). Each finished
search's journal is logged, cut to the fields read here, to
``cache/proof-cost-<bench>.jsonl`` under a key holding its code version
(:func:`code_version`); a later invocation reuses the entries of the current version.

**Fates of rollouts** (a search's rollouts: its stop record's ``rollouts_total``; the
test split it opens at the end is not counted). ``start``: the start record's
``rollouts_total`` (the start config on the first screening chunk). A candidate record's
``rollouts`` are what it newly ran: of them ``screening_rollouts`` screened it (all of
them where it has no confirmation block), the rest confirmed it. Screening goes to
``screening null`` / ``harmful`` / ``helpful`` by the move's TRUE dev effect (exact mean
of the candidate's success probabilities over the dev tasks less the incumbent's):
``|effect| < EPS_NULL`` (0.002, a fifth of a point) is null, below that harmful, above
helpful (and of the helpful, those worth less than ``SMALL``, a point, are also given).
A confirmation ``refused`` ends in verdict rejected, ``promoted`` in a
promotion. ``other``: confirmations cut short by the budget (verdict skipped, "budget
spent during confirmation") and any rollouts of the stop total that no record holds.
Shares pool the rollouts of all searches of a row (sum over searches / sum of totals).

**Regret**: the exact test score of the best config of the registry grid within every
tolerance (``quality_truth.exact_optimum``) less the exact test score of the config the
search ends with. **Rollouts per proven promotion**: all rollouts of the row's searches
over all their promotions.

**Fixed-sample size** (``benchmarks/fixed_sample.py``, where the formula is). forge's
paired tests (``forge.stats.paired.paired_test``, used by racing and the confirmation)
take a TASK as the unit: a task's delta is the mean over its K paired attempts of
candidate minus incumbent. For a promoted move: ``delta``, the true mean difference of
success probability over the tasks its confirmation tests (dev and val pooled, as
``forge.search.confirm`` pools them); ``sd_d``, the true sd of a task's delta (the
spread of the tasks' effects plus the attempts' Bernoulli variance over K, that of
independent draws or of one shared draw); ``n = ceil(((z_{1-alpha} + z_{0.90}) sd_d /
delta)^2)`` tasks, the normal approximation of the one-sided paired test at the bench's
alpha with 90% power; ``fixed = 2 K n`` rollouts (K attempts of each config on n
tasks). Draws are shared where the harness's ``draw_key`` of both configs is equal
(sparse: configs that agree on its null settings); closedform's draw hashes the whole
config, so two configs never share it.
The ratio is the promoted candidate record's ``rollouts`` (its screening and
confirmation, not earlier records of the same move) over ``fixed``. It is also given
at the level the confirmation spent (its ``level``, smaller than alpha: the search
spreads alpha over its confirmations). A promotion whose true effect is <= 0 has no
fixed size: counted apart as false.

**Strong move from the start**: a one-setting change of the start config (any legal
value) whose exact dev+val effect is >= 0.05 and whose exact metric means stay within
every tolerance; the share of searches at the smallest budget with at least one
promotion is reported among the searches of a bench where one exists.

Written: ``results/proof-cost.json`` and ``results/proof-cost.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import quality_truth as qt  # noqa: E402
from fixed_sample import fixed_sample_tasks, paired_sd  # noqa: E402
from gates import machine  # noqa: E402
from quality import UNBOUNDED_STEPS, _quiet, source_hash  # noqa: E402

BENCHES = ("closedform", "sparse")
BUDGETS = (2000, 5000, 20000)
EPS_NULL = 0.002
POWER = 0.90
STRONG = 0.05
#: Helpful moves below this true dev effect (a point) are also counted apart.
SMALL = 0.01
FATES = ("start", "screen_null", "screen_harmful", "screen_helpful", "confirm_refused",
         "confirm_promoted", "other")
#: Bumped when what a logged search keeps changes.
LOG_VERSION = 1
_KEEP = ("kind", "config", "rollouts_total", "step", "move", "verdict", "incumbent",
         "candidate", "dev", "rollouts", "screening_rollouts", "why", "precision_round",
         "final_config", "promotions", "reason")


# -- searches -----------------------------------------------------------------------------------


def code_version(name: str) -> str:
    """forge's search code (``quality.SEARCH_CODE``), the bench's digest and this log's
    format."""
    return f"search-{source_hash()[:12]}-bench-{qt.bench_of(name).digest[:12]}-log{LOG_VERSION}"


def run_search(job: tuple[str, int, int]) -> dict[str, Any]:
    """One seeded search, as quality.py's forge-auto; its journal cut to ``_KEEP``."""
    from forge.search.launch import launch_search
    _quiet()
    name, budget, seed = job
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="forge-proof-") as tmp:
        out = launch_search(qt.BENCHES[name], journals=Path(tmp), run_id=f"p-{seed}",
                            seed=seed, proposer="auto", budget_rollouts=budget,
                            max_steps=UNBOUNDED_STEPS, patience=UNBOUNDED_STEPS)
    records = [{k: r[k] for k in _KEEP if k in r} for r in out.records
               if r.get("kind") in ("start", "candidate", "stop", "end")]
    return {"bench": name, "budget": budget, "seed": seed, "records": records,
            "wall_s": time.perf_counter() - t0}


# -- truth --------------------------------------------------------------------------------------


class Truth:
    """Exact per-task success probabilities of configs of one closed-form bench."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bench = qt.bench_of(name)
        self.mod = qt.formulas(name)
        self.k = self.bench.spec.rollouts.k
        self.alpha = self.bench.spec.gates.alpha
        self.dev = [t.input for t in self.bench.tasks("dev")]
        self.pooled = self.dev + [t.input for t in self.bench.tasks("val")]
        self._p: dict[tuple[str, str], list[float]] = {}

    def config(self, values: dict[str, Any]) -> Any:
        return self.bench.registry.validate_config(values)

    def probs(self, values: dict[str, Any], which: str) -> list[float]:
        key = (json.dumps(values, sort_keys=True), which)
        if key not in self._p:
            tasks = self.dev if which == "dev" else self.pooled
            self._p[key] = [self.mod.success_probability(values, t) for t in tasks]
        return self._p[key]

    def effect(self, inc: dict[str, Any], cand: dict[str, Any], which: str) -> float:
        a, b = self.probs(inc, which), self.probs(cand, which)
        return math.fsum(b) / len(b) - math.fsum(a) / len(a)

    def shared(self, a: dict[str, Any], b: dict[str, Any]) -> bool:
        key = getattr(self.mod, "draw_key", None)
        return key is not None and bool(key(a) == key(b))

    def fixed(self, inc: dict[str, Any], cand: dict[str, Any], alpha: float) -> dict[str, Any]:
        pi, pc = self.probs(inc, "pooled"), self.probs(cand, "pooled")
        delta = self.effect(inc, cand, "pooled")
        sd = paired_sd(pi, pc, k=self.k, shared=self.shared(inc, cand))
        n = fixed_sample_tasks(delta, sd, alpha=alpha, power=POWER) if delta > 0 else None
        return {"delta": delta, "sd_d": sd, "n_tasks": n,
                "rollouts": None if n is None else 2 * self.k * n}

    def feasible(self, values: dict[str, Any]) -> bool:
        start = self.mod.expected_metrics(self.bench.defaults.values)
        return not qt.violations(self.name, start, self.mod.expected_metrics(values))

    def strong_from_start(self) -> float:
        """The largest dev+val effect of a one-setting change of the start within every
        tolerance."""
        start = dict(self.bench.defaults.values)
        best = 0.0
        for key, setting in self.bench.registry.settings.items():
            for value in qt._grid(setting):
                cand = self.config({**start, key: value}).values
                if cand != start and self.feasible(cand):
                    best = max(best, self.effect(start, cand, "pooled"))
        return best


# -- one search's figures -----------------------------------------------------------------------


def _charge_screening(fates: dict[str, int], effect: float, rollouts: int) -> None:
    fate = ("screen_null" if abs(effect) < EPS_NULL else
            "screen_harmful" if effect < 0 else "screen_helpful")
    fates[fate] += rollouts
    if fate == "screen_helpful" and effect < SMALL:
        fates["small"] = fates.get("small", 0) + rollouts


def _candidate(truth: Truth, rec: dict[str, Any], known: dict[str, dict[str, Any]],
               fates: dict[str, int], promos: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Charges one candidate record's rollouts to their fates; returns the config it
    promoted, if it did. ``known`` maps the fingerprints seen to their configs: a step's
    records name its incumbent, and come after a promotion of the same step."""
    if rec.get("candidate") is None:  # an illegal move: no config, nothing run
        fates["other"] += int(rec.get("rollouts") or 0)
        return None
    move = rec["move"]
    inc = known[rec["incumbent"]]
    cand = truth.config({**inc, move["target"]: move["after"]})
    known.setdefault(cand.fingerprint, dict(cand.values))
    if cand.fingerprint != rec["candidate"]:
        raise ValueError(f"{truth.name}: step {rec['step']}: rebuilt {cand.values} does not "
                         f"match the journaled candidate {rec['candidate'][:12]}")
    spent = int(rec.get("rollouts") or 0)
    confirm_block = (rec.get("dev") or {}).get("confirm")
    screening = spent if confirm_block is None else int(rec["screening_rollouts"])
    effect = truth.effect(inc, cand.values, "dev")
    _charge_screening(fates, effect, screening)
    if confirm_block is not None:
        # Cut short by the budget (verdict skipped): neither refused nor promoted.
        fate = {"promoted": "confirm_promoted", "rejected": "confirm_refused"}.get(
            rec["verdict"], "other")
        fates[fate] += spent - screening
    if rec["verdict"] != "promoted":
        return None
    level = confirm_block["level"] if confirm_block else None
    promos.append({"move": move, "rollouts": spent, "dev_effect": effect,
                   "at_alpha": truth.fixed(inc, cand.values, truth.alpha),
                   "at_level": truth.fixed(inc, cand.values, level) if level else None})
    return dict(cand.values)


def analyse(truth: Truth, run: dict[str, Any], best_feasible: float) -> dict[str, Any]:
    """Regret, rollouts by fate and each promotion's cost of one logged search."""
    fates = dict.fromkeys(FATES, 0)
    promos: list[dict[str, Any]] = []
    inc: dict[str, Any] = {}
    known: dict[str, dict[str, Any]] = {}
    total = 0
    final: dict[str, Any] = {}
    for rec in run["records"]:
        kind = rec["kind"]
        if kind == "start":
            inc = dict(rec["config"])
            known[truth.config(inc).fingerprint] = inc
            fates["start"] += int(rec["rollouts_total"])
        elif kind == "candidate":
            inc = _candidate(truth, rec, known, fates, promos) or inc
        elif kind == "stop":
            total = int(rec["rollouts_total"])
        elif kind == "end":
            final = dict(rec["final_config"])
    if final != inc:
        raise ValueError(f"{truth.name} seed {run['seed']}: the promotions rebuilt end at "
                         f"{inc}, the end record at {final}")
    small = fates.pop("small", 0)
    unheld = total - sum(fates.values())
    fates["other"] += unheld
    test = qt.truth(truth.name, final, "test")
    return {"seed": run["seed"], "budget": run["budget"], "rollouts": total, "fates": fates,
            "unheld": unheld, "small_helpful": small,
            "promotions": promos, "final_config": final, "test": test["score"],
            "regret": best_feasible - test["score"], "feasible": truth.feasible(final),
            "wall_s": run["wall_s"]}


# -- tables -------------------------------------------------------------------------------------


def _ratios(promos: list[dict[str, Any]], which: str) -> list[float]:
    return [p["rollouts"] / p[which]["rollouts"] for p in promos
            if p[which] is not None and p[which]["rollouts"]]


def _stat(how: Callable[[list[float]], float], values: list[float]) -> float | None:
    return how(values) if values else None


def _shares(rows: list[dict[str, Any]], total: int) -> dict[str, Any]:
    return {"shares": {f: sum(r["fates"][f] for r in rows) / total for f in FATES},
            "unheld_share": sum(r["unheld"] for r in rows) / total,
            "small_helpful_share": sum(r["small_helpful"] for r in rows) / total}


def _proofs(proven: list[dict[str, Any]]) -> dict[str, float | None]:
    ratio, ratio_level = _ratios(proven, "at_alpha"), _ratios(proven, "at_level")
    fixed = [p["at_alpha"]["rollouts"] for p in proven]
    return {"ratio_mean": _stat(statistics.fmean, ratio),
            "ratio_median": _stat(statistics.median, ratio),
            "ratio_level_mean": _stat(statistics.fmean, ratio_level),
            "ratio_level_median": _stat(statistics.median, ratio_level),
            "fixed_rollouts_median": _stat(statistics.median, fixed)}


def summarise(rows: list[dict[str, Any]], strong: bool) -> dict[str, Any]:
    total = sum(r["rollouts"] for r in rows)
    promos = [p for r in rows for p in r["promotions"]]
    proven = [p for p in promos if p["at_alpha"]["n_tasks"] is not None]
    regrets = [r["regret"] for r in rows]
    return {
        "searches": len(rows), "rollouts_mean": total / len(rows), **_shares(rows, total),
        "promotions_per_search": len(promos) / len(rows),
        "rollouts_per_promotion": total / len(promos) if promos else None,
        "false_promotions": len(promos) - len(proven),
        "regret_mean": statistics.fmean(regrets),
        "regret_sd": statistics.stdev(regrets) if len(rows) > 1 else 0.0,
        "p_infeasible": sum(not r["feasible"] for r in rows) / len(rows),
        **_proofs(proven),
        "share_with_promotion": (sum(bool(r["promotions"]) for r in rows) / len(rows)
                                 if strong else None)}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = "{:,.0f}") -> str:
    return "–" if x is None else fmt.format(x)


def _worker_s(data: dict[str, Any]) -> float:
    return math.fsum(float(r["wall_s"]) for b in data["benches"].values()
                     for r in b["searches"])


def render(data: dict[str, Any]) -> str:
    out = ["# The cost of proof", "",
           f"{data['date']} · {data['machine']} · {data['workers']} workers · "
           f"{data['wall_s']:.0f} s this invocation ({data['resumed']} searches resumed from "
           "cache/proof-cost-<bench>.jsonl); the searches took "
           f"{_worker_s(data):,.0f} s of worker time", "", f"`{data['command']}`", "",
           "Method: benchmarks/proof_cost.py's docstring. Null: |true dev effect| < "
           f"{EPS_NULL}. Shares pool the rollouts of a row's searches. Fixed-sample size: "
           f"a one-sided paired test (tasks as units, K attempts each, both configs) at "
           f"the bench's alpha with {POWER:.0%} power for the move's true dev+val effect; "
           "ratio = the promoted candidate record's rollouts / that size. Other: confirmations "
           "cut short by the budget, and rollouts of the stop total that no record holds "
           "(the JSON's unheld_share).", ""]
    for name, bench in data["benches"].items():
        out += [f"## {name}", "",
                f"Start {bench['start_test']:.3f} true test; best feasible "
                f"{bench['best_feasible_test']:.3f} (`{json.dumps(bench['best_feasible_config'])}`"
                f"), best overall {bench['best_test']:.3f} ({bench['grid_configs']:,} configs "
                f"enumerated). Largest feasible one-setting effect from the start: "
                f"{bench['strong_from_start']:+.3f}.", "",
                "| budget | seeds | start | screening null moves | screening harmful moves | "
                "screening helpful moves (of them, worth < 1 point) | confirmations refused | "
                "confirmations promoted | "
                "other | promotions per search | rollouts per proven promotion | "
                "promotion rollouts / fixed-sample size (mean, median) | the same at the "
                "spent level | regret to best feasible (mean ± sd) | P(infeasible) |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for budget, s in bench["rows"].items():
            sh = s["shares"]
            out.append(
                f"| {int(budget):,} | {s['searches']} | "
                + " | ".join(_pct(sh[f]) + (f" ({_pct(s['small_helpful_share'])})"
                                            if f == "screen_helpful" else "") for f in FATES)
                + f" | {s['promotions_per_search']:.1f} | "
                f"{_num(s['rollouts_per_promotion'])} | "
                f"{_num(s['ratio_mean'], '{:.1f}')}, {_num(s['ratio_median'], '{:.1f}')} | "
                f"{_num(s['ratio_level_mean'], '{:.1f}')}, "
                f"{_num(s['ratio_level_median'], '{:.1f}')} | "
                f"{s['regret_mean']:.3f} ± {s['regret_sd']:.3f} | {_pct(s['p_infeasible'])} |")
        low = bench["rows"].get(str(min(int(b) for b in bench["rows"])))
        if low and low["share_with_promotion"] is not None:
            out += ["", f"At {min(int(b) for b in bench['rows']):,} rollouts, "
                    f"{_pct(low['share_with_promotion'])} of searches proved at least one "
                    "promotion (a feasible move worth >= 5 points exists from the start)."]
        false = sum(s["false_promotions"] for s in bench["rows"].values())
        out += ["", f"Promotions whose true dev+val effect is <= 0 (no fixed size): {false}.",
                ""]
    for note in data.get("notes", []):
        out += [note, ""]
    return "\n".join(out)


# -- the run ------------------------------------------------------------------------------------


def _key(job: tuple[str, int, int], version: str) -> str:
    return json.dumps([*job, version])


def collect(jobs: list[tuple[str, int, int]], *, workers: int, run: bool = True
            ) -> tuple[list[dict[str, Any]], int]:
    """Every job's logged search: from the cache where its version matches, else run
    (long ones first) and logged as it ends; with ``run`` false, the logged ones only."""
    versions = {name: code_version(name) for name in {j[0] for j in jobs}}
    runs: list[dict[str, Any]] = []
    todo = []
    done: dict[str, dict[str, Any]] = {}
    for name in versions:
        path = HERE / "cache" / f"proof-cost-{name}.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                with contextlib.suppress(json.JSONDecodeError, KeyError):
                    entry = json.loads(line)
                    done[entry["key"]] = entry["run"]
    for job in jobs:
        hit = done.get(_key(job, versions[job[0]]))
        if hit is None:
            todo.append(job)
        else:
            runs.append(hit)
    resumed = len(runs)
    if not run:
        todo = []
    todo.sort(key=lambda j: -j[1])
    t0 = time.perf_counter()
    (HERE / "cache").mkdir(exist_ok=True)
    with mp.get_context("fork").Pool(workers, maxtasksperchild=10) as pool:
        for i, new in enumerate(pool.imap_unordered(run_search, todo), 1):
            runs.append(new)
            job = (new["bench"], new["budget"], new["seed"])
            with (HERE / "cache" / f"proof-cost-{job[0]}.jsonl").open("a") as fh:
                fh.write(json.dumps({"key": _key(job, versions[job[0]]), "run": new},
                                    default=str) + "\n")
            print(f"[{time.perf_counter() - t0:5.0f} s] {i}/{len(todo)} {job[0]} b{job[1]} "
                  f"s{job[2]} {new['wall_s']:.1f} s", file=sys.stderr, flush=True)
    return runs, resumed


def bench_summary(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    truth = Truth(name)
    optimum = qt.exact_optimum(name)
    assert optimum is not None, name
    best = optimum["best_feasible"]["score"]
    strong = truth.strong_from_start()
    analysed = [analyse(truth, r, best) for r in runs if r["bench"] == name]
    budgets = sorted({r["budget"] for r in analysed})
    return {"start_test": qt.truth(name, truth.bench.defaults.values, "test")["score"],
            "best_feasible_test": best, "best_feasible_config": optimum["best_feasible"]["config"],
            "best_test": optimum["best"]["score"], "grid_configs": optimum["configs"],
            "strong_from_start": strong,
            "rows": {str(b): summarise([r for r in analysed if r["budget"] == b],
                                       strong >= STRONG) for b in budgets},
            "searches": sorted(analysed, key=lambda r: (r["budget"], r["seed"]))}


def _shown(argv: list[str]) -> list[str]:
    """The arguments but the notes (the results file prints those apart)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if not skip and arg != "--note" and not arg.startswith("--note="):
            out.append(arg)
        skip = arg == "--note"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--benches", default=",".join(BENCHES))
    ap.add_argument("--budgets", default=",".join(str(b) for b in BUDGETS))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--seeds-at", default="",
                    help="fewer seeds at some budgets: BUDGET=SEEDS[,BUDGET=SEEDS]")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rerender", action="store_true",
                    help="tables from the logged searches only (runs nothing)")
    ap.add_argument("--note", action="append", default=[],
                    help="a line for the results file (e.g. why a budget has fewer seeds)")
    args = ap.parse_args()
    _quiet()
    import forge.search.launch  # noqa: F401  (imported once; forked workers inherit it)
    seeds_at = {int(b): int(n) for b, n in (p.split("=") for p in args.seeds_at.split(",") if p)}
    jobs = [(name, budget, seed) for name in args.benches.split(",")
            for budget in (int(b) for b in args.budgets.split(","))
            for seed in range(1, seeds_at.get(budget, args.seeds) + 1)]
    t0 = time.perf_counter()
    runs, resumed = collect(jobs, workers=args.workers, run=not args.rerender)
    data = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(),
            "command": " ".join(["python benchmarks/proof_cost.py", *_shown(sys.argv[1:])]),
            "workers": args.workers, "wall_s": time.perf_counter() - t0, "resumed": resumed,
            "eps_null": EPS_NULL, "power": POWER, "notes": args.note,
            "benches": {name: bench_summary(name, runs) for name in args.benches.split(",")}}
    out = HERE / "results"
    (out / "proof-cost.json").write_text(json.dumps(data, indent=1, default=str))
    text = render(data)
    (out / "proof-cost.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
