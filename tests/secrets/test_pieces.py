"""Pieces of a secret (12 characters of it in a row, split by whitespace, in base64 or
percent-encoded) are in no file forge writes: forge.secrets.pieces through redact."""

from __future__ import annotations

import base64
import json
import random
import re
import string
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import MakeBench, readable_bytes, run_forge, stored_text
from hypothesis import given, settings
from hypothesis import strategies as st

from forge.secrets.masking import (
    MASK,
    clear_secrets,
    clip,
    redact,
    register_secret,
    secret_from_env,
)

ENV = "FORGE_HARNESS_TOKEN"
LENGTHS = (20, 48, 100)


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    clear_secrets()
    yield
    clear_secrets()


def make_key(length: int, seed: int = 0) -> str:
    """A key with characters that percent-encoding and base64's two alphabets change."""
    rng = random.Random(seed * 1000 + length)
    alphabet = string.ascii_letters + string.digits + "-_"
    chars = [rng.choice(alphabet) for _ in range(length)]
    for at, special in zip((3, length // 2, length - 4), "/+=", strict=True):
        chars[at] = special
    return "".join(chars)


def _chunks(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _b64_aligned(raw: bytes, alignment: int) -> str:
    """The base64 characters that encode ``raw``'s bytes alone, at ``alignment``."""
    encoded = base64.b64encode(bytes(alignment) + raw).decode()
    return encoded[-(-8 * alignment // 6):(8 * (alignment + len(raw))) // 6]


def echoes(key: str) -> dict[str, str]:
    """What a server may send back of ``key`` (never the key whole and plain)."""
    raw = key.encode()
    piece = min(40, len(key) * 5 // 6)  # 40 of 48; 16 of 20
    start = len(key) // 10
    return {
        "piece": key[start:start + piece],
        "spaced": " ".join(_chunks(key, 5)),
        "lines": "\n".join(_chunks(key, 7)),
        "b64": base64.b64encode(raw).decode(),
        "b64-urlsafe": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "b64-in-a-blob": base64.b64encode(b"header:" + raw + b":trailer").decode(),
        "b64-of-a-piece-in-a-blob": base64.b64encode(b"xy" + raw[2:-3] + b"z").decode(),
        "b64-in-a-blob-wrapped": "\n".join(_chunks(base64.b64encode(b"0" + raw).decode(), 16)),
        "percent": quote(key, safe=""),
        "percent-lower": re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(),
                                quote(key, safe="")),
    }


def windows(key: str) -> set[str]:
    """Every 12 characters in a row of ``key`` and of its encodings."""
    raw = key.encode()
    forms = [key, quote(key, safe=""), quote(key, safe="").lower()]
    for alignment in range(3):
        aligned = _b64_aligned(raw, alignment)
        forms += [aligned, aligned.replace("+", "-").replace("/", "_")]
    return {f[i:i + 12] for f in forms for i in range(len(f) - 11)}


def leaks(data: str, key: str) -> list[str]:
    """The windows of ``key`` (:func:`windows`) in ``data`` as written, or once the
    whitespace and escaped newlines and tabs between its characters are taken out."""
    joined = re.sub(r"\s+|\\[nrt]", "", data)
    return sorted(w for w in windows(key) if w in data or w in joined)


# -- redact --------------------------------------------------------------------------------


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("form", list(echoes("x" * 20)))
def test_every_echo_of_a_key_is_masked(length: int, form: str) -> None:
    key = make_key(length)
    echo = echoes(key)[form]
    assert leaks(echo, key), "the check finds the echo unmasked"
    assert register_secret(key)
    for text in (f"the service said {echo}, twice: {echo}.",
                 json.dumps({"output": f"said {echo}", "n": 12345678901234})):
        shown = redact(text)
        assert not leaks(shown, key), (form, shown)
        assert MASK in shown
        assert redact(shown) == shown
    if "blob" not in form:  # what encodes the rest of a blob stays
        assert json.loads(redact(json.dumps({"output": echo, "n": 1}))) == {"output": MASK,
                                                                            "n": 1}


@pytest.mark.parametrize("length", LENGTHS)
def test_a_run_of_fewer_than_12_characters_of_a_key_is_left(length: int) -> None:
    key = make_key(length)
    register_secret(key)
    text = f"a {key[:11]} b {key[-11:]} c"  # ordinary text shares this much with keys
    assert redact(text) == text


def test_a_key_shorter_than_12_characters_is_masked_whole_only() -> None:
    key = "kT9/xQ+2vR"  # 10 characters
    assert register_secret(key)
    b64 = base64.b64encode(key.encode()).decode()
    assert redact(f"a {key} b {b64} c {quote(key, safe='')} d") == f"a {MASK} b {MASK} c {MASK} d"
    assert redact(f"a {key[:9]} b {' '.join(key)} c") == f"a {key[:9]} b {' '.join(key)} c"


def test_text_without_the_key_is_left_as_it_is() -> None:
    register_secret(make_key(48))
    rng = random.Random(5)
    blobs = [base64.b64encode(rng.randbytes(200)).decode() for _ in range(200)]
    text = json.dumps({"blobs": blobs, "words": " ".join(
        rng.choice(["tool", "call", "the", "answer", "is", "42"]) for _ in range(20000))})
    assert redact(text) is text or redact(text) == text


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from(string.ascii_letters + string.digits + '"\\/é€\n\t<>&\'%+= '),
               min_size=12, max_size=60),
       st.data())
def test_pieces_of_any_key_leave_the_json_they_are_in_valid(key: str, data: st.DataObject) -> None:
    # Each example on its own: a key an earlier example registered may cover this one's
    # neighbours (the fixture clears between tests, not between examples).
    clear_secrets()
    if not register_secret(key):
        return
    start = data.draw(st.integers(0, len(key) - 12))
    piece = key[start:data.draw(st.integers(start + 12, len(key)))]
    document = json.dumps({"a": f"pre{piece}post", "b": [piece, 1.5e10], "c": f"é{key}"})
    shown = redact(document)
    back = json.loads(shown)  # still JSON: no mask cut an escape or a quote
    # The key whole is one mask (whitespace at its ends is not part of a piece). The mask
    # may take the é too, whole: another form's piece can reach into its escape (a key
    # starting with a tab has the percent form "%09..."; its "9..." runs on from the
    # "9" of "\u00e9"), and a mask never cuts an escape in two.
    assert back["b"][1] == 1.5e10 and re.fullmatch(r"(é\s*)?\*\*\*\s*", back["c"])
    assert key not in json.dumps(back, ensure_ascii=False)


@pytest.mark.parametrize("length", LENGTHS)
def test_a_clip_through_a_spaced_key_leaves_no_piece(length: int) -> None:
    key = make_key(length)
    spaced = (" " * 10).join(key)  # 12 key characters span 122 characters of text
    register_secret(key)
    for cut in range(60, 60 + 11 * length, 7):
        text = "#" * 50 + spaced + "#" * 400
        shown = clip(text, cut)
        assert not leaks(shown, key), (cut, shown)
        whole = redact(text)
        assert shown == (whole if len(whole) <= cut else whole[:cut] + "...")


def test_redact_of_1_mb_with_a_48_character_key_is_fast() -> None:
    # It runs on every attempt's output and every line forge writes.
    rng = random.Random(9)
    lines = [json.dumps({"output": " ".join(rng.choice(["the", "tool", "said", "ok"])
                                             for _ in range(30)),
                         "blob": base64.b64encode(rng.randbytes(90)).decode()})
             for _ in range(3000)]
    text = "\n".join(lines)[:2**20]
    key = make_key(48)
    register_secret(key)
    echoed = text[:500_000] + " ".join(_chunks(key, 6)) + text[500_000:]
    best = min(_timed(lambda: redact(echoed)) for _ in range(5))
    assert not leaks(redact(echoed), key)
    assert best < 0.1, best  # about 7 ms on the machine this was written on


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


# -- through the files forge writes ---------------------------------------------------------

ECHO_HARNESS = f"""
import base64, os, re
from urllib.parse import quote


def _chunks(text, size):
    return [text[i:i + size] for i in range(0, len(text), size)]


def run(config, task, ctx):
    key = os.environ["{ENV}"]
    echo = task.input["echo"]
    if task.input["where"] == "error":
        raise RuntimeError("the service refused: " + echo)
    if task.input["where"] == "trace":
        return {{"output": "done", "trace": {{"reply": echo, "headers": [echo]}}}}
    return {{"output": "the answer, and " + echo}}
"""


def _echo_tasks(key: str) -> dict[str, list[dict[str, object]]]:
    rows = [{"id": f"{form}-{where}", "input": {"echo": echo, "where": where},
             "expected": "right"}
            for form, echo in echoes(key).items() for where in ("output", "error", "trace")]
    again = [{**row, "id": f"{split}-{row['id']}", "input": {**row["input"], "split": split}}
             for split in ("val", "test") for row in rows]
    return {"dev": rows, "val": again[:len(rows)], "test": again[len(rows):]}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("length", LENGTHS)
def test_echoes_of_a_key_reach_no_file_of_an_eval_or_a_search(
        make_bench: MakeBench, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, length: int) -> None:
    key = make_key(length, seed=1)
    monkeypatch.setenv(ENV, key)
    secret_from_env(ENV)  # as a plugin reading its credential through forge would
    bench = make_bench(textwrap.dedent(ECHO_HARNESS), tasks=_echo_tasks(key),
                       rollouts={"k": 1})
    code, _, err = run_forge(capsys, "eval", bench, "--save", tmp_path / "r.json")
    assert code == 0, err
    journals = tmp_path / "journals"
    code, out, err = run_forge(capsys, "search", bench, "--journals", journals, "--run-id",
                               "r1", "--max-steps", "1", "-k", "1", "--budget-rollouts", "200")
    assert code == 0, err
    files = [tmp_path / "r.json", *(p for p in journals.rglob("*") if p.is_file())]
    assert {p.name for p in files} >= {"r.json", "attempts.jsonl.gz", "journal.jsonl"}
    for path in files:  # the attempt store decompressed: a byte search of gzip finds nothing
        assert not leaks(readable_bytes(path).decode("utf-8"), key), path
    assert not leaks(out + err, key)
    result = (tmp_path / "r.json").read_text(encoding="utf-8")
    attempts = stored_text(journals / "r1")
    for data in (result, attempts):  # the echoes were there, and were masked
        assert f"the answer, and {MASK}" in data and f"the service refused: {MASK}" in data
        assert re.search(r'"reply": ?"\*\*\*"', data)


@pytest.mark.parametrize("key", ['00000000000000000000"', '"abcdefghijklmnopqrst"',
                                 "\t00000000000A"])
def test_a_key_with_a_quote_or_an_escape_at_its_end_leaves_the_json_valid(key: str) -> None:
    # Found by the property above: the raw form of a key ending in a quote matched the
    # closing quote of a JSON string holding a piece of it, and its mask took the quote.
    assert register_secret(key)
    document = json.dumps({"b": [key[:20], 1.5e10], "c": f"é{key}", "d": key})
    back = json.loads(redact(document))
    assert back["b"][1] == 1.5e10
    assert key not in json.dumps(back, ensure_ascii=False)
