"""Every upper bound forge puts on what it reads and holds, in one place.

Input files, harness outputs and command-line options come from people and programs
forge does not control. Without a bound, a typo (``k: 1000000000``) or a hostile file
(a YAML "billion laughs", 3,000 nested brackets, a 5,000-digit integer) exhausts memory
or hangs instead of being refused with one line. Each bound is far above what a real
bench needs; README.md ("Bounds") lists them.
"""

from __future__ import annotations

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_CHOICES",
    "MAX_CONCURRENCY",
    "MAX_INT_DIGITS",
    "MAX_JUDGED_CHARS",
    "MAX_K",
    "MAX_METRIC",
    "MAX_NESTING",
    "MAX_OUTPUT_BYTES",
    "MAX_PRINTED_CHARS",
    "MAX_SETTINGS",
    "MAX_TASKS",
    "MAX_TIMEOUT_S",
    "MAX_YAML_BYTES",
    "MAX_YAML_NODES",
]

#: Levels of nested lists and mappings in one value of a JSON or YAML input file.
#: Deeper values would overflow the interpreter's stack in the parsers and in every
#: recursive walk after them (validation, canonical JSON, digests).
MAX_NESTING = 100
#: Digits of one integer in a JSON or YAML input file (Python refuses to convert
#: more than 4,300, and a bound or an id that long is never meant).
MAX_INT_DIGITS = 1000
#: Nodes of one YAML document once its aliases are expanded: a document of a few
#: hundred bytes can otherwise expand to billions of nodes.
MAX_YAML_NODES = 1_000_000
#: Bytes (UTF-8) of a YAML input file, and of the text its scalars (keys and values)
#: add up to once its aliases are expanded. An alias repeats its anchor's text: a
#: 1.4 MB registry that reused a 1 MiB description 5,000 times stood for 5 GB, and
#: a digest of it, as JSON, took 7 GB of memory before it failed. A registry, a bench
#: or a config is a few kilobytes.
MAX_YAML_BYTES = 16 * 2**20

#: Attempts per task (``rollouts.k``, ``-k``).
MAX_K = 1000
#: Tasks in one split file.
MAX_TASKS = 100_000
#: Attempts in one evaluation: K times the tasks of the split. Each attempt is held
#: in memory with its output until the evaluation ends.
MAX_ATTEMPTS = 1_000_000
#: Attempts in flight at once (``rollouts.concurrency``): each is a thread lane or
#: a coroutine with its own harness state.
MAX_CONCURRENCY = 1024
#: Per-attempt timeout in seconds (a week): a longer one is a typo, and an event
#: loop cannot schedule an infinite one.
MAX_TIMEOUT_S = 7 * 24 * 3600.0
#: Choices of one enum setting. Each is a move of the neighbourhood.
MAX_CHOICES = 10_000
#: Settings of one registry. A search lists, ranks and keys every setting's moves each
#: step, and its proposer fits a model per setting: at 10,000 settings the first
#: candidate comes about 13 s after the start and each later step takes about 21 s of
#: forge's own time (benchmarks/results/scaling.md); twice as many doubles both, and
#: loading the registry's YAML alone takes seconds.
MAX_SETTINGS = 10_000

#: One attempt's output as JSON (a Python harness's ``RunOutput``), as the command
#: harness bounds its stdout: more is an ``error``, and nothing of it is stored.
MAX_OUTPUT_BYTES = 16 * 2**20
#: Characters kept of what one attempt of a python harness printed on stdout (the last
#: ones, after a line saying how many bytes came before them). Every attempt is kept
#: in the attempt store and a saved result: a harness printing a page per attempt must
#: not make a search's store gigabytes long, and the tail is what tells why it failed.
MAX_PRINTED_CHARS = 8192
#: Magnitude of one attempt's cost or metric value. Far above any real one, and low
#: enough that sums and squares over every attempt of an evaluation stay finite: a
#: cost of 1.7e308 on some attempts made a search's means overflow, and it died.
MAX_METRIC = 1e100
#: Characters of each text the ``judge`` scorer fences into its prompt (the output,
#: the task input, the reference); the rest is cut, and the prompt says so.
MAX_JUDGED_CHARS = 100_000
