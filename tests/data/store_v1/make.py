"""How ``tests/data/store_v1/golden/`` was made: a run folder whose attempt store is plain
``attempts.jsonl`` (store format 1), written by forge at commit f7574f5, the last before
the compressed store. Kept so that the fixture's origin is on record; not run by the
tests. Running it again needs a forge of before the compressed store:

    git archive f7574f5 | tar -x -C /tmp/old
    cd /tmp/old && PYTHONPATH=$PWD python /path/to/tests/data/store_v1/make.py

It runs the golden search of ``tests/data/golden`` (``forge search tests/data/verdicts
--proposer sweep --seed 1 --candidates 5``) and keeps its ``run.json``, the first three
journal records and the first 100 attempts of its store, as a kill -9 after the third
record would leave them with fewer attempts on file: the resume replays those records
from the store, runs what is missing, and must reach the golden decisions.
``bench_path`` in ``run.json`` names the machine's bench; the test points it at its copy.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent / "verdicts"

from forge.cli import main  # noqa: E402


def main_() -> None:
    journals = Path(tempfile.mkdtemp())
    try:
        code = main(["search", str(BENCH), "--proposer", "sweep", "--seed", "1",
                     "--candidates", "5", "--run-id", "golden", "--journals", str(journals),
                     "--json"])
        if code != 0:
            sys.exit(f"the search ended with exit {code}")
        run = journals / "golden"
        if not (run / "attempts.jsonl").exists():
            sys.exit("this forge writes the compressed store: run a forge of before it")
        out = HERE / "golden"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        shutil.copy(run / "run.json", out / "run.json")
        for name, keep in (("journal.jsonl", 3), ("attempts.jsonl", 100)):
            lines = (run / name).read_text(encoding="utf-8").splitlines(keepends=True)
            (out / name).write_text("".join(lines[:keep]), encoding="utf-8")
    finally:
        shutil.rmtree(journals, ignore_errors=True)


if __name__ == "__main__":
    main_()
