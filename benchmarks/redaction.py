"""Benchmark: how long ``redact`` takes on a megabyte of text with a few secrets registered.

    python benchmarks/redaction.py                        # this checkout
    python benchmarks/redaction.py --before /path/to/old  # and that checkout, same texts

``redact`` runs on every attempt's output and every line forge writes, so its speed on
ordinary text is what matters; the texts are about 1 MB each, with three 48-character
keys registered:

- ``ascii``: attempt-like JSON lines (answers, tool calls, metrics), the keys echoed
  twice;
- ``escaped``: the same with non-ASCII answers as ``json.dumps`` writes them (``\\u4e2d``
  escapes, one ``\\u200b`` in a key);
- ``unicode``: the same with the non-ASCII characters written as they are (``ensure_ascii
  =False``), a soft hyphen in a key;
- ``clean``: the ascii text with no key in it (the common case).

Printed: the median milliseconds per text over ``--repeat`` runs, and with
``--before``, the ratio of this checkout's time to that one's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

KEYS = ["sk-" + "".join(random.Random(i).choices("abcdefghijkLMNOPQ0123456789_-", k=45))
        for i in range(3)]


def texts() -> dict[str, str]:
    rng = random.Random(7)
    words = ["the", "answer", "is", "tool", "called", "result", "error", "value", "42",
             "question", "because", "then", "config", "search"]
    chinese = "中文的回答是这个结果因为然后"

    def line(i: int, foreign: bool) -> dict[str, object]:
        text = " ".join(rng.choice(words) for _ in range(30))
        if foreign:
            text += " " + "".join(rng.choice(chinese) for _ in range(20))
        return {"task_id": f"dev-{i}", "attempt": i % 5, "seed": rng.getrandbits(62),
                "output": {"output": text, "tool_calls": [{"name": "search",
                                                           "args": {"q": text[:40]}}],
                           "metrics": {"latency": rng.random()}}}

    out: dict[str, str] = {}
    for name, foreign, ascii_only in (("ascii", False, True), ("escaped", True, True),
                                      ("unicode", True, False), ("clean", False, True)):
        rows, size = [], 0
        i = 0
        while size < 1_000_000:
            row = json.dumps(line(i, foreign), ensure_ascii=ascii_only)
            rows.append(row)
            size += len(row) + 1
            i += 1
        if name != "clean":
            mark = {"ascii": "", "escaped": "\u200b", "unicode": "\u00ad"}[name]
            echo = KEYS[0][:20] + mark + KEYS[0][20:]
            for at in (len(rows) // 3, 2 * len(rows) // 3):
                rows[at] = rows[at][:-1] + ", " + json.dumps(
                    {"echo": echo}, ensure_ascii=ascii_only)[1:]
        out[name] = "\n".join(rows) + "\n"
    return out


def measure(repeat: int) -> dict[str, float]:
    from forge.secrets.masking import redact, register_secret

    for key in KEYS:
        register_secret(key)
    results: dict[str, float] = {}
    for name, text in texts().items():
        redact(text)  # warm up
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            redact(text)
            times.append(time.perf_counter() - start)
        results[name] = 1000 * statistics.median(times)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of forge to compare with")
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.repeat)))
        return
    here = Path(__file__).resolve().parents[1]
    runs = {"this": here} | ({"before": args.before.resolve()} if args.before else {})
    found = {}
    for label, checkout in runs.items():
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        done = subprocess.run([sys.executable, __file__, "--measure", "--repeat",
                               str(args.repeat)], env=env, capture_output=True, text=True,
                              check=True)
        found[label] = json.loads(done.stdout)
    print(f"{'text':10} " + " ".join(f"{label:>12}" for label in found)
          + ("        ratio" if "before" in found else ""))
    for name in found["this"]:
        row = f"{name:10} " + " ".join(f"{found[label][name]:9.2f} ms" for label in found)
        if "before" in found:
            row += f"  {found['this'][name] / found['before'][name]:10.2f}x"
        print(row)


if __name__ == "__main__":
    main()
