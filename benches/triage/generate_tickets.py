"""Regenerate ``tasks/{dev,val,test}.jsonl`` deterministically from the templates.

    .venv/bin/python benches/triage/generate_tickets.py [--check]

Each ticket comes from an intent's phrasing family (dev-only families in dev,
held-out families in val and test, shared ones everywhere), filled with entities
from the template database, and roughened with typos and distracting sentences.
The expected answer and tool call come from running the gold tool on a fresh copy
of the database, so every ticket is solvable. ``--check`` regenerates in memory and
fails if the committed files differ.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from triage_catalog import CATALOG
from triage_db import CATEGORIES, fresh_connection
from triage_retrieval import tokens
from triage_templates import INTENTS, Intent
from triage_tools import call_tool

SEED = 7
SPLITS = ("dev", "val", "test")
PER_SPLIT = 5  # tickets per intent per split
OUT = Path(__file__).resolve().parent / "tasks"
CURRENCY_WORDS = {"USD": "dollars", "EUR": "euros", "GBP": "pounds", "JPY": "yen",
                  "CAD": "canadian dollars"}
def _pick(rng: random.Random, con: sqlite3.Connection, sql: str) -> sqlite3.Row:
    rows = con.execute(sql).fetchall()
    return rows[rng.randrange(len(rows))]


def entities(intent: Intent, rng: random.Random, con: sqlite3.Connection) -> dict[str, Any]:
    """Slot values and the customer for one ticket of ``intent``."""
    order_sql = {
        "any_order": "SELECT * FROM orders ORDER BY id",
        "shipped_order": "SELECT * FROM orders WHERE status IN ('shipped', 'delivered') "
                         "ORDER BY id",
        "delivered_order": "SELECT * FROM orders WHERE status = 'delivered' ORDER BY id",
        "open_order": "SELECT * FROM orders WHERE status IN ('pending', 'processing') "
                      "ORDER BY id",
        "failed_payment": "SELECT o.* FROM orders o JOIN payments p ON p.order_id = o.id "
                          "WHERE p.status = 'failed' ORDER BY o.id",
        "refundable_order": "SELECT o.* FROM orders o JOIN payments p ON p.order_id = o.id "
                            "WHERE p.status = 'captured' AND o.status IN ('shipped', "
                            "'delivered') ORDER BY o.id",
        "multi_line_order": "SELECT o.* FROM orders o JOIN payments p ON p.order_id = o.id "
                            "WHERE p.status = 'captured' AND (SELECT COUNT(*) FROM "
                            "order_lines l WHERE l.order_id = o.id) >= 2 ORDER BY o.id",
    }
    slots: dict[str, Any] = {}
    if intent.needs in order_sql:
        order = _pick(rng, con, order_sql[intent.needs])
        slots["order"] = order["id"]
        customer = order["customer_id"]
        if intent.needs == "multi_line_order":
            lines = con.execute("SELECT sku FROM order_lines WHERE order_id = ? ORDER BY sku",
                                (order["id"],)).fetchall()
            slots["sku"] = lines[rng.randrange(len(lines))][0]
    else:
        where = "WHERE locked = 1" if intent.needs == "locked_customer" else ""
        customer = _pick(rng, con, f"SELECT id FROM customers {where} ORDER BY id")[0]
    if intent.needs == "product":
        product = _pick(rng, con, "SELECT * FROM products ORDER BY sku")
        slots.update(sku=product["sku"], pname=product["name"])
    if intent.needs == "money":
        cfrom, cto = rng.sample(sorted(CURRENCY_WORDS), 2)
        amount = rng.choice([rng.randint(5, 900), round(rng.uniform(5, 500), 2)])
        slots.update(amount=amount, cfrom=cfrom, cto=cto)
    if intent.needs == "code":
        slots["code"] = _pick(rng, con, "SELECT code FROM promo_codes ORDER BY code")[0]
    if intent.needs == "category":
        category = rng.choice(sorted(CATEGORIES))
        slots.update(category=category, kind=rng.choice(CATEGORIES[category]))
    if "address" in intent.key_args:
        slots["address"] = (f"{rng.randint(1, 240)} {rng.choice(['Cedar', 'Maple', 'Willow'])} "
                            f"{rng.choice(['Street', 'Road', 'Lane'])}, "
                            f"{rng.choice(['Leeds', 'Lyon', 'Osaka', 'Austin', 'Bristol'])}")
    slots.setdefault("order", _pick(rng, con, f"SELECT id FROM orders WHERE customer_id = "
                                              f"{customer} ORDER BY id")[0]
                     if con.execute("SELECT 1 FROM orders WHERE customer_id = ?",
                                    (customer,)).fetchone() else 10001)
    return {"slots": slots, "customer_id": customer}


def gold_args(intent: Intent, slots: dict[str, Any], customer_id: int) -> dict[str, Any]:
    """The gold call's arguments (key arguments, plus the customer where the tool takes one)."""
    names = {"order_id": "order", "sku": "sku", "amount": "amount", "from_currency": "cfrom",
             "to_currency": "cto", "address": "address", "code": "code", "category": "category"}
    args = {a: slots[names[a]] for a in intent.key_args}
    if "customer_id" in CATALOG[intent.tool].args:
        args["customer_id"] = customer_id
    return args


def fill(template: str, slots: dict[str, Any], rng: random.Random) -> str:
    shown = dict(slots)
    if "cfrom" in slots and rng.random() < 0.4:  # currencies as words now and then
        shown.update(cfrom=CURRENCY_WORDS[slots["cfrom"]], cto=CURRENCY_WORDS[slots["cto"]])
    return template.format(**shown)


def typo(text: str, tool: str, rng: random.Random) -> str | None:
    """``text`` with one word mistyped (a swap or a dropped letter), or None.

    Customers mistype the word that matters as often as any other, so the typo lands
    on a distinctive word (in at most three tool descriptions) of the gold tool's
    description when the ticket has one.
    """
    described = {w for w in tokens(tool.replace("_", " ") + " " + CATALOG[tool].description)
                 if sum(w in d for d in _DOCS) <= 3}
    words = [m for m in re.finditer(r"[A-Za-z]{5,}", text) if tokens(m.group()) and
             tokens(m.group())[0] in described]
    if not words:
        return None
    m = words[rng.randrange(len(words))]
    w = m.group()
    i = rng.randrange(1, len(w) - 2)
    bad = w[:i] + w[i + 1] + w[i] + w[i + 2:] if rng.random() < 0.5 else w[:i] + w[i + 1:]
    return text[:m.start()] + bad + text[m.end():]


_DOCS = [set(tokens(n.replace("_", " ") + " " + t.description)) for n, t in CATALOG.items()]


def distractor(slots: dict[str, Any], customer_id: int, rng: random.Random,
               con: sqlite3.Connection) -> tuple[str, bool] | None:
    """A distracting sentence and whether it goes first, or None if nothing fits."""
    own = [r[0] for r in con.execute("SELECT id FROM orders WHERE customer_id = ? AND id != ? "
                                     "ORDER BY id",
                                     (customer_id, slots.get("order", 0)))]
    options: list[tuple[str, bool]] = [
        (f"I've been a loyal customer since {rng.randint(2012, 2023)}.", rng.random() < 0.5)]
    if "order" in slots:
        other = _pick(rng, con, f"SELECT id FROM orders WHERE customer_id != {customer_id} "
                              "ORDER BY id")[0]
        options += [(f"My friend's order {other} got here already.", True),
                    (f"I'm in the {rng.randint(60000, 99999)} area.", True)]
        if own:
            o2 = own[rng.randrange(len(own))]
            options += [(f"Order {o2} came fine last week.", True),
                        (f"My other order {o2} is fine, by the way.", False)]
    if "sku" in slots:
        sku2 = _pick(rng, con, f"SELECT sku FROM products WHERE sku != '{slots['sku']}' "
                            "ORDER BY sku")[0]
        options.append((f"I also bought {sku2} last month and love it.", rng.random() < 0.5))
    return options[rng.randrange(len(options))]


def make_ticket(intent: Intent, family: str, scope: str, template: str, rng: random.Random,
                con: sqlite3.Connection) -> dict[str, Any]:
    ent = entities(intent, rng, con)
    slots, cid = ent["slots"], ent["customer_id"]
    text = fill(template, slots, rng)
    tags = [intent.name, f"family:{intent.name}/{family}", scope]
    if rng.random() < 0.5:
        mistyped = typo(text, intent.tool, rng)
        if mistyped is not None:
            text = mistyped
            tags.append("typo")
    if rng.random() < 0.35:
        extra = distractor(slots, cid, rng, con)
        if extra is not None:
            sentence, first = extra
            text = f"{sentence} {text}" if first else f"{text} {sentence}"
            tags.append("distractor")
    if family in intent.critical:
        tags.append("critical")
    args = gold_args(intent, slots, cid)
    outcome = call_tool(fresh_connection(), intent.tool, args)
    assert outcome.ok and outcome.result is not None, (intent.name, args, outcome.error)
    answer = outcome.result[CATALOG[intent.tool].answer]
    key = {k: v for k, v in args.items() if k in intent.key_args or k == "customer_id"}
    return {"input": {"ticket": text, "customer_id": cid}, "expected": answer, "tags": tags,
            "metadata": {"intent": intent.name, "family": family, "scope": scope},
            "expected_tools": [{"name": intent.tool, "args": key}]}


def plan(intent: Intent, split: str) -> list[tuple[str, str]]:
    """(family, scope) for each of the intent's tickets in ``split``."""
    shared = [f for f, (where, _) in intent.families.items() if where == "shared"]
    special = [f for f, (where, _) in intent.families.items()
               if where == ("dev" if split == "dev" else "heldout")]
    n_special = (2 if split == "dev" else intent.n_heldout) if special else 0
    scope = "dev-only" if split == "dev" else "heldout"
    out = [(special[i % len(special)], scope) for i in range(n_special)]
    out += [(shared[i % len(shared)], "shared") for i in range(PER_SPLIT - n_special)]
    return out


def generate() -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(SEED)
    con = fresh_connection()
    seen: set[str] = set()
    splits: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for split in SPLITS:
        for intent in INTENTS:
            for n, (family, scope) in enumerate(plan(intent, split)):
                templates = intent.families[family][1]
                for _ in range(50):  # a repeated text is drawn again
                    ticket = make_ticket(intent, family, scope,
                                         templates[(n + rng.randrange(2)) % len(templates)],
                                         rng, con)
                    if ticket["input"]["ticket"] not in seen:
                        break
                seen.add(ticket["input"]["ticket"])
                splits[split].append(ticket)
        rng.shuffle(splits[split])
        for i, ticket in enumerate(splits[split]):
            splits[split][i] = {"id": f"{split}-{i:03d}", **ticket}
    return splits


def render(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, sort_keys=False) + "\n" for r in rows)


def main(argv: list[str]) -> int:
    splits = generate()
    if "--check" in argv:
        stale = [s for s in SPLITS
                 if (OUT / f"{s}.jsonl").read_text() != render(splits[s])]
        print("stale: " + ", ".join(stale) if stale else "tickets are up to date")
        return 1 if stale else 0
    OUT.mkdir(exist_ok=True)
    for split, rows in splits.items():
        (OUT / f"{split}.jsonl").write_text(render(rows))
        print(f"{split}: {len(rows)} tickets -> {OUT / f'{split}.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
