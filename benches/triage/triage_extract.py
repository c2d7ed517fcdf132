"""Argument extraction: ticket text -> candidate values for each argument of a tool.

Each argument kind has a regex-based extractor that returns *scored candidates*, not
one value, because tickets carry distractors ("my friend's order 14869 got here",
"I'm in the 98230 area"). The agent samples among the candidates with its
temperature, and ``validate_args`` can fall back to the next candidate when the
first one does not check out against the database.
"""

from __future__ import annotations

import re
from typing import Any

from triage_catalog import ToolSpec
from triage_db import CATEGORIES

__all__ = ["Candidates", "extract"]

#: (value, plausibility) pairs, most plausible first.
Candidates = list[tuple[Any, float]]

CURRENCIES = {"usd": "USD", "eur": "EUR", "gbp": "GBP", "jpy": "JPY", "cad": "CAD",
              "dollars": "USD", "dollar": "USD", "euros": "EUR", "euro": "EUR",
              "pounds": "GBP", "pound": "GBP", "yen": "JPY", "canadian dollars": "CAD"}
_CUR = "|".join(sorted((re.escape(c) for c in CURRENCIES), key=len, reverse=True))
_MONEY = re.compile(rf"(\d+(?:\.\d+)?)\s*({_CUR})\b.*?\b(?:in|to|into)\s+({_CUR})\b", re.I)
_ORDER = re.compile(r"\d{5}")
_SKU = re.compile(r"\bSKU-?(\d{4})\b", re.I)
_ADDRESS = re.compile(r"\b\d{1,4} [A-Z][a-z]+ (?:Street|Road|Lane|Avenue|Drive), [A-Z][a-z]+")
_CODE = re.compile(r"\b(?!SKU\b)[A-Z][A-Z0-9]{3,11}\b")
_EMAIL = re.compile(r"\b\S+@\S+\.\w+\b")
_POINTS = re.compile(r"(\d+)\s+points", re.I)
# Context that marks a number as *not* the one the customer is asking about.
_ASIDE_BEFORE = re.compile(r"(friend|other|also bought)\W*(?:\w+\W+){0,2}$", re.I)
_ASIDE_AFTER = re.compile(r"^\W*(?:\w+\W+){0,1}(came fine|is fine|got here|arrived fine)", re.I)
KINDS = {kind: cat for cat, kinds in CATEGORIES.items() for kind in kinds}


def _order_ids(text: str) -> Candidates:
    out: Candidates = []
    for m in _ORDER.finditer(text):
        before, after = text[max(0, m.start() - 30):m.start()], text[m.end():m.end() + 30]
        score = 0.6  # a bare five-digit number
        if re.search(r"(order\s*#?|#)\s*$", before, re.I):
            score = 1.0
        if _ASIDE_BEFORE.search(before) or _ASIDE_AFTER.search(after):
            score -= 0.5
        out.append((int(m.group()), score))
    return out


def _skus(text: str) -> Candidates:
    out: Candidates = []
    for m in _SKU.finditer(text):
        aside = re.search(r"also bought\s*$", text[max(0, m.start() - 20):m.start()], re.I)
        out.append((f"SKU-{m.group(1)}", 0.5 if aside else 1.0))
    return out


def _money(text: str) -> dict[str, Candidates]:
    m = _MONEY.search(text)
    if m is None:
        return {}
    raw = float(m.group(1))
    amount: int | float = int(raw) if raw.is_integer() and "." not in m.group(1) else raw
    return {"amount": [(amount, 1.0)], "from_currency": [(CURRENCIES[m.group(2).lower()], 1.0)],
            "to_currency": [(CURRENCIES[m.group(3).lower()], 1.0)]}


def _category(text: str) -> Candidates:
    low = text.lower()
    found = [(cat, 1.0) for kind, cat in KINDS.items() if kind in low]
    return found or [(cat, 0.8) for cat in CATEGORIES if cat in low]


def _single(pattern: re.Pattern[str], text: str, cast: type = str) -> Candidates:
    return [(cast(m.group(1) if m.groups() else m.group()), 1.0)
            for m in pattern.finditer(text)]


def extract(spec: ToolSpec, text: str, customer_id: int) -> dict[str, Candidates] | None:
    """Candidates for every argument of ``spec``; None if a required one has none.

    Optional arguments without a candidate are left out (the ``reason`` of a
    refund, say, gets a fixed value). The customer id comes from the ticket's
    envelope, never from its text.
    """
    money = _money(text) if "amount" in spec.args or "from_currency" in spec.args else {}
    out: dict[str, Candidates] = {}
    for name, arg in spec.args.items():
        if name == "customer_id":
            found: Candidates = [(customer_id, 1.0)]
        elif name == "order_id":
            found = _order_ids(text)
        elif name == "sku":
            found = _skus(text)
        elif name in ("amount", "from_currency", "to_currency"):
            found = money.get(name, [])
        elif name == "address":
            found = _single(_ADDRESS, text)
        elif name == "code":
            found = _single(_CODE, text)
        elif name == "email":
            found = _single(_EMAIL, text)
        elif name == "points":
            found = _single(_POINTS, text, int)
        elif name == "category":
            found = _category(text)
        elif name == "query":
            found = [(kind, 1.0) for kind in KINDS if kind in text.lower()]
        elif name == "reason":
            found = [("customer request", 1.0)]
        else:  # pragma: no cover - every catalogued argument is handled above
            found = []
        if found:
            out[name] = sorted(found, key=lambda c: -c[1])
        elif arg.required:
            return None
    return out
