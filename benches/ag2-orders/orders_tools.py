"""The tools of the ag2-orders agent: plain Python functions over a small order book.

AG2 turns their signatures and docstrings into the tool schemas the model sees, and
runs them when the model calls them. They are the ground truth of this bench: an
order's status, item count and total are what ``ORDERS`` says.
"""

from __future__ import annotations

#: The order book: id -> customer, status, number of items, total in US dollars.
ORDERS: dict[str, dict[str, object]] = {
    f"A-{1000 + i}": {"customer": customer, "status": status, "items": items,
                      "total_usd": total}
    for i, (customer, status, items, total) in enumerate([
        ("Ines", "shipped", 3, 42.50), ("Marek", "pending", 1, 19.99),
        ("Sana", "delivered", 4, 88.00), ("Tomas", "cancelled", 2, 30.25),
        ("Lea", "shipped", 5, 120.40), ("Kofi", "returned", 1, 15.00),
        ("Aiko", "delivered", 2, 64.75), ("Ravi", "pending", 6, 210.10),
        ("Noor", "shipped", 2, 27.30), ("Emil", "delivered", 3, 55.55),
        ("Zoe", "pending", 4, 99.95), ("Hugo", "cancelled", 1, 12.00),
        ("Mira", "shipped", 7, 305.60), ("Owen", "returned", 2, 41.20),
        ("Yuki", "delivered", 1, 9.99), ("Ana", "shipped", 3, 77.70),
        ("Bo", "pending", 2, 33.33), ("Cruz", "delivered", 5, 140.00),
        ("Dara", "shipped", 1, 22.45), ("Eli", "returned", 3, 66.60),
    ])
}

#: Units of each currency per US dollar.
RATES: dict[str, float] = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.0, "CHF": 0.88}


def find_order(order_id: str) -> dict[str, object]:
    """Look an order up by its id (like A-1004): its customer, status, number of items
    and total in US dollars."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise KeyError(f"no order {order_id!r}")
    return {"order_id": order_id.strip().upper(), **order}


def convert(amount_usd: float, currency: str) -> float:
    """Convert an amount in US dollars to another currency (USD, EUR, GBP, JPY, CHF),
    rounded to cents."""
    rate = RATES.get(currency.strip().upper())
    if rate is None:
        raise ValueError(f"unknown currency {currency!r}")
    return round(amount_usd * rate, 2)


TOOLS = [find_order, convert]
