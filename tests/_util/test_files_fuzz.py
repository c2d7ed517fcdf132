"""A seeded fuzz corpus of hostile input files: every corruption of the shipped benches
ends in exit 0 or in one ``forge: error:`` line with exit 2 naming a file, without a
traceback, within a time limit.

The corpus: copies of ``benches/triage`` and ``benches/walksat`` (their splits cut to a
few tasks, so that each case is quick), their registries and default configs, and the
``run.json`` of a finished run on the triage copy. Each case corrupts one of those
files with one or two mutations drawn from a seeded generator (bytes that are not
UTF-8 or are control characters, cut or doubled lines, numbers of thousands of digits
or out of range, ``NaN``/``-Infinity``/``.inf``, lone surrogates, 3,000 levels of
nesting, YAML billion laughs, cycles and odd tags, huge enums and strings), then runs
the command that reads it: ``forge eval BENCH --task X`` (which loads and checks the
whole bench, then refuses the unknown task X), ``forge registry show``, ``forge journal
show`` and ``forge search --resume``. Each case is restored before the next one.

A case that fails is named with its number, file and mutations; the generator is
seeded, so the same cases come in the same order on every run.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest

from forge.cli import main
from forge.search.launch import launch_search

REPO = Path(__file__).resolve().parents[2]
SEED = 20261130
#: Cases per run of the suite, and the time each may take (a slow, shared 2-core CI
#: machine included). Measured: README, "Bounds".
N_CASES = 260
CASE_SECONDS = 20.0
#: Tasks kept per split of each bench copy.
TASKS_KEPT = 4
NO_TASK = "__fuzz_no_such_task__"

# -- mutations ---------------------------------------------------------------------------

_BYTES = [b"\x00", b"\x1b", b"\xff", b"\xc3", b"\x80", b"\x7f", b"\x0b", b"\r", b"\t",
          b"\xef\xbb\xbf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]
_NUMBERS = [b"9" * 5000, b"-" + b"9" * 1200, b"1" + b"0" * 400, b"1e400", b"-1e400",
            b"1000000000", b"4294967296", b"-1", b"0", b"1e-400", b"0.1", b"-0"]
_JSON_ONLY = [b"NaN", b"-Infinity", b"Infinity", b'"\\ud800"', b'"\\udfff"',
              b'"\\ud83d"', b'"\\u001b[31m"', b'"\\u0000"', b'"a\\nb"', b'""', b"null",
              b"true", b"[]", b"{}", b'"' + b"x" * 200_000 + b'"', b'{"$ref": 1}']
_YAML_ONLY = [b".inf", b"-.inf", b".nan", b"0x7fffffffffffffffffff", b"1_000_000_000",
              b"0o777", b"190:20:30", b'"\\ud800"', b'"\\e[31m"', b'"\\0"', b'"\\x00"',
              b"!!binary not-base64", b"!!python/object/apply:os.system ['true']",
              b"*undefined", b"!!set {a, b}", b"2024-13-45", b"~", b"{}", b"[]",
              b"&cycle [*cycle]", b"x" * 200_000, b"''", b"!!float abc", b"!!int 1.5",
              b"<<: *undefined", b"? [a, b]"]
_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_TOKEN = rf'{_NUMBER}|"(?:[^"\\\n]|\\.)*"|[A-Za-z_][A-Za-z0-9_.-]*'


def _laughs(levels: int) -> bytes:
    lines = [b"_l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [b"_l%d: &l%d [%s]" % (i, i, b", ".join([b"*l%d" % (i - 1)] * 9))
              for i in range(1, levels + 1)]
    return b"\n".join(lines) + b"\n"


@dataclass(frozen=True)
class Mutation:
    name: str
    apply: Callable[[bytes, random.Random], bytes]


def _at(data: bytes, rng: random.Random) -> int:
    return rng.randrange(len(data) + 1)


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _insert_byte(data: bytes, rng: random.Random) -> bytes:
    at = _at(data, rng)
    return data[:at] + rng.choice(_BYTES) + data[at:]


def _flip_byte(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return b"\xff"
    at = rng.randrange(len(data))
    return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:_at(data, rng)]


def _drop_line(data: bytes, rng: random.Random) -> bytes:
    lines = _lines(data)
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def _double_line(data: bytes, rng: random.Random) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    lines.insert(i, lines[i])
    return b"\n".join(lines)


def _swap_lines(data: bytes, rng: random.Random) -> bytes:
    lines = _lines(data)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def _replace_token(pool: list[bytes]) -> Callable[[bytes, random.Random], bytes]:
    import re

    token = re.compile(_TOKEN.encode())

    def apply(data: bytes, rng: random.Random) -> bytes:
        matches = list(token.finditer(data))
        if not matches:
            return data + rng.choice(pool)
        m = rng.choice(matches)
        return data[:m.start()] + rng.choice(pool) + data[m.end():]

    return apply


def _nest(depth: int, yaml: bool) -> Callable[[bytes, random.Random], bytes]:
    import re

    token = re.compile(_TOKEN.encode())

    def apply(data: bytes, rng: random.Random) -> bytes:
        matches = list(token.finditer(data))
        if not matches:
            return b"[" * depth + data + b"]" * depth
        m = rng.choice(matches)
        inner = b"[" * depth + m.group() + b"]" * depth
        return data[:m.start()] + inner + data[m.end():]

    return apply


def _laugh_at_a_value(data: bytes, rng: random.Random) -> bytes:
    import re

    values = list(re.finditer(rb": ([^\n{\[]+)\n", data))
    if not values:
        return _laughs(9) + data
    m = rng.choice(values)
    return _laughs(9) + data[:m.start(1)] + b"*l9" + data[m.end(1):]


def _huge_enum(data: bytes, rng: random.Random) -> bytes:
    import re

    m = re.search(rb"choices: \[[^\]]*\]", data)
    if m is None:
        return data
    n = rng.choice([10_001, 12_000])
    choices = b", ".join(b"c%d" % i for i in range(n))
    return data[:m.start()] + b"choices: [" + choices + b"]" + data[m.end():]


def _duplicate_key(data: bytes, rng: random.Random) -> bytes:
    lines = [line for line in _lines(data) if line and not line.startswith(b"#")]
    return data + b"\n" + rng.choice(lines) + b"\n" if lines else data


COMMON = [Mutation("insert byte", _insert_byte), Mutation("flip bit", _flip_byte),
          Mutation("truncate", _truncate), Mutation("drop line", _drop_line),
          Mutation("double line", _double_line), Mutation("swap lines", _swap_lines),
          Mutation("hostile number", _replace_token(_NUMBERS))]
JSON_MUTATIONS = [*COMMON, Mutation("hostile JSON value", _replace_token(_JSON_ONLY)),
                  Mutation("hostile JSON value", _replace_token(_JSON_ONLY)),
                  Mutation("nest 3000", _nest(3000, yaml=False)),
                  Mutation("nest 101", _nest(101, yaml=False))]
YAML_MUTATIONS = [*COMMON, Mutation("hostile YAML value", _replace_token(_YAML_ONLY)),
                  Mutation("hostile YAML value", _replace_token(_YAML_ONLY)),
                  Mutation("nest 3000", _nest(3000, yaml=True)),
                  Mutation("nest 101", _nest(101, yaml=True)),
                  Mutation("billion laughs", _laugh_at_a_value),
                  Mutation("duplicate key", _duplicate_key)]
REGISTRY_MUTATIONS = [*YAML_MUTATIONS, Mutation("huge enum", _huge_enum)]


# -- the corpus --------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A file to corrupt and the commands that read it: ``commands`` all run, or one of
    them drawn per case when ``one_of`` (two readers of the same file)."""

    path: Path
    mutations: list[Mutation]
    commands: list[list[str]]
    weight: int = 1
    one_of: bool = False


@dataclass(frozen=True)
class Corpus:
    root: Path
    journals: Path
    run: Path
    targets: list[Target]


def _copy_bench(name: str, root: Path) -> Path:
    folder = root / "benches" / name
    shutil.copytree(REPO / "benches" / name, folder,
                    ignore=shutil.ignore_patterns("__pycache__", "*.md", "generate_*.py"))
    for split in folder.glob("tasks/*.jsonl"):
        lines = split.read_bytes().split(b"\n")[:TASKS_KEPT]
        split.write_bytes(b"\n".join(lines) + b"\n")
    return folder


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(REPO / "registry", root / "registry")
    triage, walksat = _copy_bench("triage", root), _copy_bench("walksat", root)
    journals = root / "journals"
    launch_search(triage, journals=journals, run_id="run", max_steps=1, k=1, seed=3)
    targets: list[Target] = []
    for bench in (triage, walksat):
        load = ["eval", str(bench), "--task", NO_TASK]
        targets.append(Target(bench / "bench.yaml", YAML_MUTATIONS, [load], weight=3))
        targets += [Target(split, JSON_MUTATIONS, [load], weight=2)
                    for split in sorted(bench.glob("tasks/*.jsonl"))]
        name = bench.name
        registry = root / "registry" / f"{name}.yaml"
        targets.append(Target(registry, REGISTRY_MUTATIONS,
                              [load, ["registry", "show", str(registry)]], weight=3,
                              one_of=True))
        targets.append(Target(root / "registry" / f"{name}.defaults.yaml", YAML_MUTATIONS,
                              [load], weight=2))
    run_json = journals / "run" / "run.json"
    targets.append(Target(run_json, JSON_MUTATIONS, [
        ["journal", "show", "run", "--journals", str(journals), "--json"],
        ["journal", "list", "--journals", str(journals)],
        ["search", "--resume", "run", "--journals", str(journals)]], weight=4))
    return Corpus(root=root, journals=journals, run=journals / "run", targets=targets)


# -- running a case ----------------------------------------------------------------------


class _TimedOut(BaseException):
    """Raised in the main thread when a case takes longer than CASE_SECONDS."""


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: FrameType | None) -> None:
        raise _TimedOut

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class Case:
    number: int
    target: Target
    mutations: list[str]
    data: bytes
    commands: list[list[str]]

    def describe(self) -> str:
        return (f"case {self.number} (seed {SEED}): {self.target.path.name} "
                f"after {', '.join(self.mutations)}")


def cases(corpus: Corpus) -> Iterator[Case]:
    rng = random.Random(SEED)
    weighted = [t for t in corpus.targets for _ in range(t.weight)]
    for number in range(N_CASES):
        target = rng.choice(weighted)
        data = target.path.read_bytes()
        names = []
        for _ in range(rng.choice([1, 1, 1, 2])):
            mutation = rng.choice(target.mutations)
            data = mutation.apply(data, rng)
            names.append(mutation.name)
        commands = [rng.choice(target.commands)] if target.one_of else target.commands
        yield Case(number, target, names, data, commands)


def _problem(code: int, err: str, corpus: Corpus) -> str | None:
    """What is wrong with how a command ended, or None."""
    if "Traceback" in err:
        return f"a traceback: {err[-600:]}"
    if code == 0:
        return None
    if code != 2:
        return f"exit {code}: {err[-400:]}"
    lines = err.strip("\n").splitlines()
    if len(lines) != 1 or not lines[0].startswith("forge: error: "):
        return f"{len(lines)} lines on stderr: {err[:400]!r}"
    if str(corpus.root) not in lines[0]:
        return f"the error names no file: {lines[0][:300]}"
    return None


def run_case(case: Case, corpus: Corpus, capsys: pytest.CaptureFixture[str]) -> list[str]:
    original = case.target.path.read_bytes()
    run_backup = corpus.root / "run-backup"
    problems = []
    case.target.path.write_bytes(case.data)
    try:
        for command in case.commands:
            started = time.monotonic()
            try:
                with _deadline(CASE_SECONDS):
                    code = main(command)
            except _TimedOut:
                problems.append(f"{' '.join(command[:2])}: took over {CASE_SECONDS:.0f} s")
                continue
            except BaseException as exc:
                problems.append(f"{' '.join(command[:2])}: raised {type(exc).__name__}: "
                                f"{str(exc)[:300]}")
                continue
            finally:
                _, err = capsys.readouterr()
            problem = _problem(code, err, corpus)
            if problem is not None:
                problems.append(f"{' '.join(command[:2])} "
                                f"({time.monotonic() - started:.1f} s): {problem}")
    finally:
        case.target.path.write_bytes(original)
        if case.target.path.name == "run.json":  # a resume may have written the run
            shutil.rmtree(corpus.run)
            shutil.copytree(run_backup, corpus.run)
    return problems


# -- the tests ---------------------------------------------------------------------------


def test_the_corpus_itself_reads_cleanly(corpus: Corpus,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Without corruption: the load check refuses only the unknown task, a real
    evaluation runs, and the run resumes to the same end."""
    for bench in ("triage", "walksat"):
        folder = corpus.root / "benches" / bench
        code, err = main(["eval", str(folder), "--task", NO_TASK]), capsys.readouterr()[1]
        assert code == 2 and f"no task '{NO_TASK}'" in err, err
        first = (folder / "tasks" / "dev.jsonl").read_text(encoding="utf-8").split('"')[3]
        assert main(["eval", str(folder), "-k", "1", "--task", first]) == 0, \
            capsys.readouterr()[1]
    assert main(["search", "--resume", "run", "--journals", str(corpus.journals)]) == 0
    capsys.readouterr()


@pytest.mark.timeout(900)
def test_every_corruption_of_the_shipped_benches_is_exit_0_or_one_line(
        corpus: Corpus, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(corpus.run, corpus.root / "run-backup")
    started = time.monotonic()
    failures = []
    count = 0
    for case in cases(corpus):
        count += 1
        for problem in run_case(case, corpus, capsys):
            failures.append(f"{case.describe()}: {problem}")
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(f"\nfuzz: {count} cases in {elapsed:.1f} s, {len(failures)} failed")
    assert not failures, "\n".join(failures[:20])
