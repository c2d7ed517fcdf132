"""How ``tests/data/golden/`` was made (issue 14: the sequential search, journal format 2):
run again after a deliberate change to what a search journals or prints, review the
diff, and commit it. Not run by the tests.

    .venv/bin/python tests/data/golden/make.py

It runs, from the repository's root,

    forge search tests/data/verdicts --proposer sweep --seed 1 --candidates 5 \\
        --run-id golden --journals JOURNALS --json

and keeps what tests/journal/test_compat.py compares (see README.md).
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tempfile
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
BENCH = Path("tests") / "data" / "verdicts"
VOLATILE = {"at", "elapsed_s"}

from forge.cli import main  # noqa: E402


def masked(record: dict[str, Any]) -> dict[str, Any]:
    return {k: "<volatile>" if k in VOLATILE else v for k, v in record.items()}


def forge_json(*args: str) -> Any:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(list(args))
    if code != 0:
        sys.exit(f"forge {' '.join(args)}: exit {code}")
    return json.loads(out.getvalue())


def write(name: str, value: Any) -> None:
    (HERE / name).write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")


def main_() -> None:
    journals = Path(tempfile.mkdtemp())
    try:
        result = forge_json("search", str(BENCH), "--proposer", "sweep", "--seed", "1",
                            "--candidates", "5", "--run-id", "golden", "--journals",
                            str(journals), "--json")
        shown = forge_json("journal", "show", "golden", "--journals", str(journals), "--json")
        folder = journals / "golden"
        records = [json.loads(line) for line in
                   (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]
        info = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(journals)
    write("search.json", result)
    write("show.json", [masked(s) for s in shown])
    write("journal.json", [masked(r) for r in records])
    write("run.json", {k: v for k, v in info.items() if k not in {"bench_path", "created_at"}})


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    main_()
