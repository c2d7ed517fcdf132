"""The tool catalogue: every tool runs with its typed arguments and refuses bad ones."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

# The bench's helper modules, imported from its folder as forge imports them; the folder
# leaves sys.path again right after, so other benches' modules are not shadowed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches" / "triage"))

from triage_catalog import CATALOG
from triage_db import fresh_connection
from triage_tools import call_tool

BENCH = Path(__file__).resolve().parents[2] / "benches" / "triage"
sys.path.remove(str(BENCH))


def _first(con: sqlite3.Connection, sql: str) -> Any:
    row = con.execute(sql).fetchone()
    assert row is not None, sql
    return row[0]


def valid_args(con: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """One call per tool that the backend accepts, picked from the template's rows."""
    pay = "SELECT o.id FROM orders o JOIN payments p ON p.order_id = o.id WHERE "
    order = _first(con, "SELECT id FROM orders ORDER BY id")
    shipped = _first(con, "SELECT id FROM orders WHERE status = 'shipped' ORDER BY id")
    delivered = _first(con, "SELECT id FROM orders WHERE status = 'delivered' ORDER BY id")
    pending = _first(con, "SELECT id FROM orders WHERE status = 'pending' ORDER BY id")
    failed = _first(con, pay + "p.status = 'failed' ORDER BY o.id")
    captured = _first(con, pay + "p.status = 'captured' ORDER BY o.id")
    line = con.execute("SELECT l.order_id, l.sku FROM order_lines l JOIN payments p ON "
                       "p.order_id = l.order_id WHERE p.status = 'captured' "
                       "ORDER BY l.order_id").fetchone()
    customer = _first(con, "SELECT id FROM customers ORDER BY id")
    locked = _first(con, "SELECT id FROM customers WHERE locked = 1 ORDER BY id")
    rich = _first(con, "SELECT id FROM customers WHERE loyalty_points >= 100 ORDER BY id")
    sku = _first(con, "SELECT sku FROM products ORDER BY sku")
    address = "12 Cedar Street, Leeds"
    return {
        "get_order_status": {"order_id": order},
        "get_order_details": {"order_id": order},
        "list_customer_orders": {"customer_id": customer},
        "track_shipment": {"order_id": shipped},
        "get_delivery_estimate": {"order_id": shipped},
        "check_stock": {"sku": sku},
        "get_product_price": {"sku": sku},
        "get_product_info": {"sku": sku},
        "get_warranty_info": {"sku": sku},
        "search_products": {"query": "kettle"},
        "convert_currency": {"amount": 100, "from_currency": "USD", "to_currency": "EUR"},
        "get_exchange_rate": {"from_currency": "GBP", "to_currency": "JPY"},
        "get_payment_status": {"order_id": order},
        "retry_payment": {"order_id": failed},
        "refund_order": {"order_id": captured, "reason": "broken"},
        "refund_item": {"order_id": line[0], "sku": line[1]},
        "get_refund_status": {"order_id": order},
        "cancel_order": {"order_id": pending},
        "change_shipping_address": {"order_id": pending, "address": address},
        "update_account_address": {"customer_id": customer, "address": address},
        "update_email": {"customer_id": customer, "email": "new@example.com"},
        "reset_password": {"customer_id": customer},
        "unlock_account": {"customer_id": locked},
        "get_customer_profile": {"customer_id": customer},
        "get_loyalty_points": {"customer_id": customer},
        "redeem_loyalty_points": {"customer_id": rich, "points": 100},
        "check_promo_code": {"code": "SPRING10"},
        "apply_promo_code": {"order_id": pending, "code": "VIP20"},
        "get_return_policy": {"category": "audio"},
        "create_return_label": {"order_id": delivered},
        "escalate_to_human": {"customer_id": customer, "reason": "legal"},
        "unsubscribe_newsletter": {"customer_id": customer},
    }


def test_the_catalogue_has_about_thirty_described_tools() -> None:
    assert 28 <= len(CATALOG) <= 36
    for name, spec in CATALOG.items():
        assert spec.name == name and len(spec.description) > 20 and spec.args
    writes = [t for t in CATALOG.values() if t.side_effect]
    assert len(writes) >= 10
    escalate = CATALOG["escalate_to_human"]
    assert escalate.cost >= 20 * CATALOG["get_order_status"].cost  # escalation is expensive


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_tool_runs_with_its_typed_args(name: str) -> None:
    con = fresh_connection()
    args = valid_args(con)[name]
    outcome = call_tool(con, name, args)
    assert outcome.ok, outcome.error
    assert outcome.result is not None and CATALOG[name].answer in outcome.result


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_bad_arguments_are_refused_without_running(name: str) -> None:
    con = fresh_connection()
    good = valid_args(con)[name]
    required = [a for a, spec in CATALOG[name].args.items() if spec.required]
    assert required
    missing = {k: v for k, v in good.items() if k != required[0]}
    wrong_type = {**good, required[0]: [good[required[0]]]}
    unknown = {**good, "bogus": 1}
    for args in (missing, wrong_type, unknown):
        outcome = call_tool(con, name, args)
        assert not outcome.ok and outcome.error and outcome.result is None, args
    # Nothing was written by the refused calls: the good call still works once.
    assert call_tool(con, name, good).ok


def test_type_and_pattern_checks() -> None:
    con = fresh_connection()
    assert "must be int" in (call_tool(con, "get_order_status", {"order_id": "123"}).error or "")
    assert "must be int" in (call_tool(con, "get_order_status", {"order_id": True}).error or "")
    assert "does not look like" in (call_tool(con, "check_stock", {"sku": "1234"}).error or "")
    assert not call_tool(con, "no_such_tool", {}).ok


def test_business_rules_refuse_like_a_backend() -> None:
    con = fresh_connection()
    shipped = _first(con, "SELECT id FROM orders WHERE status = 'shipped' ORDER BY id")
    pending = _first(con, "SELECT id FROM orders WHERE status = 'pending' ORDER BY id")
    assert "cannot cancel" in (call_tool(con, "cancel_order", {"order_id": shipped}).error or "")
    assert "has not shipped" in (call_tool(con, "track_shipment",
                                           {"order_id": pending}).error or "")
    assert "not found" in (call_tool(con, "get_order_status", {"order_id": 99999}).error or "")
