"""Tool implementations over the attempt's private SQLite copy.

:func:`call_tool` checks the arguments against the catalogue's types first (a
wrong type, a missing or unknown argument is an error, ``ok=False``, and nothing
runs), then executes. Business rules are enforced the way a real backend does: an
order that shipped cannot be cancelled, a refund cannot be paid twice. The tools do
*not* check that an order belongs to the customer writing in; that is the agent's
job (``validate_args``), and skipping it is how a refund lands on someone else's
order.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from triage_catalog import CATALOG, ToolSpec
from triage_db import day_text

__all__ = ["RETURN_DAYS", "ToolError", "ToolOutcome", "call_tool", "check_args"]

RETURN_DAYS = {"kitchen": 30, "audio": 14, "home": 30, "outdoor": 60, "office": 45}


class ToolError(Exception):
    """A tool refused: bad arguments or a business rule. Becomes ``ok=False``."""


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    result: dict[str, Any] | None
    error: str | None


def check_args(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` if they fit ``spec``'s typed arguments, else :class:`ToolError`."""
    unknown = sorted(set(args) - set(spec.args))
    if unknown:
        raise ToolError(f"unknown argument(s) {unknown} for {spec.name}")
    for name, arg in spec.args.items():
        if name not in args:
            if arg.required:
                raise ToolError(f"missing argument {name!r} for {spec.name}")
            continue
        value = args[name]
        ok = {"int": isinstance(value, int) and not isinstance(value, bool),
              "float": isinstance(value, int | float) and not isinstance(value, bool),
              "str": isinstance(value, str)}[arg.kind]
        if not ok:
            raise ToolError(f"{name} must be {arg.kind}, got {type(value).__name__}")
        if arg.pattern and not re.fullmatch(arg.pattern, value):
            raise ToolError(f"{name}={value!r} does not look like {arg.pattern}")
    return args


def _one(con: sqlite3.Connection, sql: str, params: tuple[Any, ...], what: str) -> sqlite3.Row:
    row = con.execute(sql, params).fetchone()
    if row is None:
        raise ToolError(f"{what} not found")
    return row


def _order(con: sqlite3.Connection, order_id: int) -> sqlite3.Row:
    return _one(con, "SELECT * FROM orders WHERE id = ?", (order_id,), f"order {order_id}")


def _customer(con: sqlite3.Connection, cid: int) -> sqlite3.Row:
    return _one(con, "SELECT * FROM customers WHERE id = ?", (cid,), f"customer {cid}")


def _product(con: sqlite3.Connection, sku: str) -> sqlite3.Row:
    return _one(con, "SELECT * FROM products WHERE sku = ?", (sku,), f"product {sku}")


def _not_shipped(order: sqlite3.Row, action: str) -> None:
    if order["status"] not in ("pending", "processing"):
        raise ToolError(f"cannot {action}: order {order['id']} is {order['status']}")


def _refunded(con: sqlite3.Connection, order_id: int) -> float:
    row = con.execute("SELECT COALESCE(SUM(amount), 0) FROM refunds WHERE order_id = ?",
                      (order_id,)).fetchone()
    return round(float(row[0]), 2)


# -- read-only tools --------------------------------------------------------------------


def _order_status(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": a["order_id"], "status": _order(con, a["order_id"])["status"]}


def _order_details(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    order = _order(con, a["order_id"])
    lines = con.execute("SELECT sku, qty, unit_price FROM order_lines WHERE order_id = ?",
                        (a["order_id"],)).fetchall()
    return {"order_id": order["id"], "total": order["total"], "currency": order["currency"],
            "lines": [dict(line) for line in lines]}


def _list_orders(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    _customer(con, a["customer_id"])
    ids = [r[0] for r in con.execute("SELECT id FROM orders WHERE customer_id = ? ORDER BY id",
                                     (a["customer_id"],))]
    return {"orders": ids, "count": len(ids)}


def _shipment(con: sqlite3.Connection, order_id: int) -> sqlite3.Row:
    order = _order(con, order_id)
    row = con.execute("SELECT * FROM shipments WHERE order_id = ?", (order_id,)).fetchone()
    if row is None:
        raise ToolError(f"order {order_id} has not shipped (it is {order['status']})")
    return row


def _track(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    s = _shipment(con, a["order_id"])
    return {"carrier": s["carrier"], "tracking": s["tracking"], "status": s["status"]}


def _eta(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    s = _shipment(con, a["order_id"])
    return {"eta": day_text(s["eta_day"]), "status": s["status"]}


def _stock(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    _product(con, a["sku"])
    rows = con.execute("SELECT warehouse, qty FROM stock WHERE sku = ?", (a["sku"],)).fetchall()
    return {"available": sum(r["qty"] for r in rows), "by_warehouse": {r[0]: r[1] for r in rows}}


def _price(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return {"price_usd": _product(con, a["sku"])["price_usd"]}


def _info(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    p = _product(con, a["sku"])
    return {"name": p["name"], "category": p["category"]}


def _warranty(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return {"warranty_months": _product(con, a["sku"])["warranty_months"]}


def _search(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    rows = con.execute("SELECT sku FROM products WHERE name LIKE ?", (f"%{a['query']}%",))
    skus = [r[0] for r in rows]
    return {"skus": skus, "count": len(skus)}


def _rate(con: sqlite3.Connection, code: str) -> float:
    return float(_one(con, "SELECT per_usd FROM rates WHERE currency = ?", (code,),
                      f"currency {code}")[0])


def _convert(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    value = a["amount"] / _rate(con, a["from_currency"]) * _rate(con, a["to_currency"])
    return {"converted": round(value, 2), "currency": a["to_currency"]}


def _exchange_rate(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return {"rate": round(_rate(con, a["to_currency"]) / _rate(con, a["from_currency"]), 4)}


def _payment(con: sqlite3.Connection, order_id: int) -> sqlite3.Row:
    return _one(con, "SELECT * FROM payments WHERE order_id = ?", (order_id,),
                f"payment of order {order_id}")


def _payment_status(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    p = _payment(con, a["order_id"])
    return {"status": p["status"], "method": p["method"]}


def _refund_status(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    _order(con, a["order_id"])
    return {"refunded": _refunded(con, a["order_id"])}


def _profile(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    c = _customer(con, a["customer_id"])
    return {"name": c["name"], "email": c["email"], "tier": c["tier"]}


def _points(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return {"points": _customer(con, a["customer_id"])["loyalty_points"]}


def _promo(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    row = _one(con, "SELECT * FROM promo_codes WHERE code = ?", (a["code"],),
               f"promo code {a['code']}")
    return {"valid": bool(row["active"]), "percent": row["percent"] if row["active"] else 0}


def _policy(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    if a["category"] not in RETURN_DAYS:
        raise ToolError(f"unknown category {a['category']!r}")
    return {"days": RETURN_DAYS[a["category"]]}


# -- tools with side effects ------------------------------------------------------------


def _retry_payment(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    if _payment(con, a["order_id"])["status"] != "failed":
        raise ToolError(f"payment of order {a['order_id']} has not failed")
    con.execute("UPDATE payments SET status = 'captured' WHERE order_id = ?", (a["order_id"],))
    return {"status": "captured"}


def _refund_order(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    order = _order(con, a["order_id"])
    if _payment(con, order["id"])["status"] != "captured":
        raise ToolError(f"order {order['id']} has no captured payment to refund")
    amount = round(order["total"] - _refunded(con, order["id"]), 2)
    if amount <= 0:
        raise ToolError(f"order {order['id']} is already refunded")
    con.execute("INSERT INTO refunds (order_id, sku, amount, reason) VALUES (?, NULL, ?, ?)",
                (order["id"], amount, a.get("reason", "")))
    con.execute("UPDATE payments SET status = 'refunded' WHERE order_id = ?", (order["id"],))
    return {"refunded": amount, "currency": order["currency"]}


def _refund_item(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    order = _order(con, a["order_id"])
    line = _one(con, "SELECT * FROM order_lines WHERE order_id = ? AND sku = ?",
                (order["id"], a["sku"]), f"{a['sku']} in order {order['id']}")
    if _payment(con, order["id"])["status"] != "captured":
        raise ToolError(f"order {order['id']} has no captured payment to refund")
    if con.execute("SELECT 1 FROM refunds WHERE order_id = ? AND sku = ?",
                   (order["id"], a["sku"])).fetchone():
        raise ToolError(f"{a['sku']} of order {order['id']} is already refunded")
    amount = round(line["unit_price"] * line["qty"], 2)
    con.execute("INSERT INTO refunds (order_id, sku, amount, reason) VALUES (?, ?, ?, 'item')",
                (order["id"], a["sku"], amount))
    return {"refunded": amount, "currency": order["currency"]}


def _cancel(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    _not_shipped(_order(con, a["order_id"]), "cancel")
    con.execute("UPDATE orders SET status = 'cancelled' WHERE id = ?", (a["order_id"],))
    return {"status": "cancelled"}


def _change_shipping(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    _not_shipped(_order(con, a["order_id"]), "change the address")
    con.execute("UPDATE orders SET ship_address = ? WHERE id = ?", (a["address"], a["order_id"]))
    return {"address": a["address"]}


def _account_address(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    _customer(con, a["customer_id"])
    con.execute("UPDATE customers SET address = ? WHERE id = ?", (a["address"],
                                                                  a["customer_id"]))
    return {"address": a["address"]}


def _email(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    _customer(con, a["customer_id"])
    con.execute("UPDATE customers SET email = ? WHERE id = ?", (a["email"], a["customer_id"]))
    return {"email": a["email"]}


def _reset_password(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    _customer(con, a["customer_id"])
    con.execute("INSERT INTO password_resets (customer_id, token) VALUES (?, ?)",
                (a["customer_id"], f"tok-{a['customer_id']}"))
    return {"status": "reset_link_sent"}


def _unlock(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    if not _customer(con, a["customer_id"])["locked"]:
        raise ToolError(f"account {a['customer_id']} is not locked")
    con.execute("UPDATE customers SET locked = 0 WHERE id = ?", (a["customer_id"],))
    return {"status": "unlocked"}


def _redeem(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    balance = _customer(con, a["customer_id"])["loyalty_points"]
    if not 0 < a["points"] <= balance:
        raise ToolError(f"cannot redeem {a['points']} points; balance is {balance}")
    con.execute("UPDATE customers SET loyalty_points = ? WHERE id = ?",
                (balance - a["points"], a["customer_id"]))
    return {"credit": round(a["points"] / 100, 2)}


def _apply_promo(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    order = _order(con, a["order_id"])
    if order["status"] != "pending":
        raise ToolError(f"order {order['id']} is {order['status']}; only pending orders")
    percent = _promo(con, {"code": a["code"]})["percent"]
    if not percent:
        raise ToolError(f"promo code {a['code']} has expired")
    total = round(order["total"] * (1 - percent / 100), 2)
    con.execute("UPDATE orders SET total = ?, promo_code = ? WHERE id = ?",
                (total, a["code"], order["id"]))
    return {"total": total}


def _return_label(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    order = _order(con, a["order_id"])
    if order["status"] != "delivered":
        raise ToolError(f"order {order['id']} is {order['status']}; only delivered orders")
    label = f"RL-{order['id']}"
    con.execute("INSERT OR REPLACE INTO return_labels VALUES (?, ?)", (order["id"], label))
    return {"label": label}


def _escalate(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    con.execute("INSERT INTO escalations (customer_id, reason) VALUES (?, ?)",
                (a["customer_id"], a.get("reason", "")))
    return {"status": "escalated"}


def _unsubscribe(con: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    _customer(con, a["customer_id"])
    return {"status": "unsubscribed"}


Impl = Callable[[sqlite3.Connection, dict[str, Any]], dict[str, Any]]
IMPLS: dict[str, Impl] = {
    "get_order_status": _order_status, "get_order_details": _order_details,
    "list_customer_orders": _list_orders, "track_shipment": _track,
    "get_delivery_estimate": _eta, "check_stock": _stock, "get_product_price": _price,
    "get_product_info": _info, "get_warranty_info": _warranty, "search_products": _search,
    "convert_currency": _convert, "get_exchange_rate": _exchange_rate,
    "get_payment_status": _payment_status, "retry_payment": _retry_payment,
    "refund_order": _refund_order, "refund_item": _refund_item,
    "get_refund_status": _refund_status, "cancel_order": _cancel,
    "change_shipping_address": _change_shipping, "update_account_address": _account_address,
    "update_email": _email, "reset_password": _reset_password, "unlock_account": _unlock,
    "get_customer_profile": _profile, "get_loyalty_points": _points,
    "redeem_loyalty_points": _redeem, "check_promo_code": _promo,
    "apply_promo_code": _apply_promo, "get_return_policy": _policy,
    "create_return_label": _return_label, "escalate_to_human": _escalate,
    "unsubscribe_newsletter": _unsubscribe,
}
assert set(IMPLS) == set(CATALOG), "every catalogued tool needs an implementation"


def call_tool(con: sqlite3.Connection, name: str, args: dict[str, Any]) -> ToolOutcome:
    """Run one tool; any refusal is an outcome with ``ok=False``, never an exception."""
    spec = CATALOG.get(name)
    if spec is None:
        return ToolOutcome(False, None, f"unknown tool {name!r}")
    try:
        result = IMPLS[name](con, check_args(spec, args))
    except ToolError as exc:
        return ToolOutcome(False, None, str(exc))
    con.commit()
    return ToolOutcome(True, result, None)
