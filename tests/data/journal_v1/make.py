"""How ``tests/data/journal_v1/verdicts/`` was made (with forge at commit 11dc8f9, before
the journal records were typed): kept so that the fixture's origin is on record. It is
not run by the tests; running it again writes a new run (new timestamps, a new port in
the endpoint) that is just as valid a fixture.

    .venv/bin/python tests/data/journal_v1/make.py

The run searches ``tests/data/verdicts`` with the ``llm`` proposer against the scripted
model server of the tests, three moves queued first (as ``--from-runtime`` does), so
that its journal holds every record kind and every verdict: a promotion, a rejection by
the dev, val and aux gates each, a candidate skipped for a stronger one, and a
``proposal_invalid`` record (an unusable reply at step 1).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent.parent
sys.path.insert(0, str(TESTS))

from openai_server import ScriptedOpenAI, reply  # noqa: E402

from forge.search.launch import launch_search  # noqa: E402
from forge.config.moves import Move  # noqa: E402

BENCH = TESTS / "data" / "verdicts"
RUN = "verdicts"


def main() -> None:
    journals = HERE / "_work"
    shutil.rmtree(journals, ignore_errors=True)
    replies = iter([
        reply("I would rather not pick one."),  # step 1: no move at all
        reply(json.dumps({"setting": "knob", "value": 1, "reason": "try a lower knob"})),
        reply(json.dumps({"setting": "knob", "value": 3, "reason": "then a higher one"})),
    ])
    with ScriptedOpenAI() as server:
        server.answer_with(lambda body: next(replies))
        os.environ["FORGE_OPENAI_BASE_URL"] = server.url
        os.environ["FORGE_OPENAI_MODEL"] = "scripted-model"
        first = [Move(target=t, before=False, after=True) for t in ("boost", "overfit", "pricey")]
        launch_search(BENCH, journals=journals, run_id=RUN, seed=3, proposer="llm",
                      first_moves=first)
    out = HERE / RUN
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for name in ("run.json", "journal.jsonl", "llm_proposer.jsonl"):
        shutil.copy(journals / RUN / name, out / name)
    # The attempt store is large: only the start and final configs' attempts on the
    # shared-seed streams, first two attempts, are kept: enough for the report to read.
    records = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    end = next(r for r in records if r["kind"] == "end")
    start = next(r for r in records if r["kind"] == "start")
    keep = {start["fingerprint"], end["final_fingerprint"]}
    lines = [line for line in (journals / RUN / "attempts.jsonl").read_text().splitlines()
             if (row := json.loads(line))["config"] in keep and row["stream"] in {"dev", "val"}
             and row["result"]["attempt"] < 2]
    (out / "attempts.jsonl").write_text("\n".join(lines) + "\n")
    shutil.rmtree(journals)


if __name__ == "__main__":
    main()
