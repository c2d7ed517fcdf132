"""The triage database: deterministic generation, and one private copy per attempt."""

from __future__ import annotations

import sys
from pathlib import Path

# The bench's helper modules, imported from its folder as forge imports them; the folder
# leaves sys.path again right after, so other benches' modules are not shadowed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches" / "triage"))

import triage_db
from triage_tools import call_tool

BENCH = Path(__file__).resolve().parents[2] / "benches" / "triage"
sys.path.remove(str(BENCH))


def _dump(con) -> list[str]:  # type: ignore[no-untyped-def]
    return list(con.iterdump())


def test_generation_is_deterministic() -> None:
    assert _dump(triage_db.build_database()) == _dump(triage_db.build_database())


def test_another_seed_gives_another_database() -> None:
    assert _dump(triage_db.build_database(1)) != _dump(triage_db.build_database(2))


def test_the_copy_holds_the_template() -> None:
    assert _dump(triage_db.fresh_connection()) == _dump(triage_db.template())


def test_every_table_is_filled() -> None:
    con = triage_db.template()
    for table in ("customers", "products", "stock", "orders", "order_lines", "shipments",
                  "payments", "refunds", "rates", "promo_codes"):
        assert con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] > 0, table


def test_writes_of_one_attempt_never_reach_another() -> None:
    con = triage_db.fresh_connection()
    order = con.execute("SELECT o.id FROM orders o JOIN payments p ON p.order_id = o.id "
                        "WHERE p.status = 'captured' ORDER BY o.id").fetchone()[0]
    before = triage_db.fresh_connection().execute("SELECT COUNT(*) FROM refunds").fetchone()[0]

    outcome = call_tool(con, "refund_order", {"order_id": order})
    assert outcome.ok, outcome.error
    assert con.execute("SELECT COUNT(*) FROM refunds").fetchone()[0] == before + 1
    # A second refund of the same order is refused in the same attempt...
    assert not call_tool(con, "refund_order", {"order_id": order}).ok

    # ...but the next attempt starts from the template again and may refund it.
    fresh = triage_db.fresh_connection()
    assert fresh.execute("SELECT COUNT(*) FROM refunds").fetchone()[0] == before
    assert fresh.execute("SELECT status FROM payments WHERE order_id = ?",
                         (order,)).fetchone()[0] == "captured"
    assert call_tool(fresh, "refund_order", {"order_id": order}).ok
    assert triage_db.template().execute(
        "SELECT COUNT(*) FROM refunds").fetchone()[0] == before


def test_cancellation_is_private_too() -> None:
    con = triage_db.fresh_connection()
    order = con.execute("SELECT id FROM orders WHERE status = 'pending' ORDER BY id").fetchone()[0]
    assert call_tool(con, "cancel_order", {"order_id": order}).ok
    status = triage_db.fresh_connection().execute("SELECT status FROM orders WHERE id = ?",
                                                  (order,)).fetchone()[0]
    assert status == "pending"


def test_day_text_is_iso() -> None:
    assert triage_db.day_text(0) == triage_db.TODAY.isoformat()
    assert triage_db.day_text(1) > triage_db.day_text(0)
