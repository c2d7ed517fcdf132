"""The shop the agno-support agent answers for: its orders, its return policy, and the
three Python tools the agent calls (real functions, run by Agno).

The orders are generated from a fixed seed, so every run sees the same shop. They
are the ground truth of this bench: a task's expected answer is what the tools say.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

#: Days a delivered item may be returned, and the restocking fee kept, per category.
POLICY = {
    "electronics": {"return_days": 15, "restocking_fee_percent": 15},
    "clothing": {"return_days": 30, "restocking_fee_percent": 0},
    "books": {"return_days": 60, "restocking_fee_percent": 5},
}
ITEMS = {
    "electronics": ["headphones", "e-reader", "smart speaker", "webcam", "keyboard"],
    "clothing": ["rain jacket", "wool scarf", "running shoes", "denim shirt"],
    "books": ["atlas", "cookbook", "field guide", "poetry anthology"],
}
STATUSES = ("processing", "shipped", "delivered")


@dataclass(frozen=True)
class Order:
    order_id: str
    item: str
    category: str
    status: str
    price: float
    days_since_delivery: int | None


def _orders() -> dict[str, Order]:
    rng = random.Random(20260517)
    orders = {}
    for n in range(1001, 1121):
        category = rng.choice(sorted(POLICY))
        status = rng.choice(STATUSES) if n % 3 == 0 else "delivered"
        days = rng.randint(1, 75) if status == "delivered" else None
        order_id = f"A{n}"
        orders[order_id] = Order(order_id, rng.choice(ITEMS[category]), category, status,
                                 round(rng.uniform(8, 240), 2), days)
    return orders


ORDERS = _orders()


def lookup_order(order_id: str) -> str:
    """Look up an order of the shop by its id.

    Args:
        order_id: the order's id, like A1001

    Returns:
        The order as JSON: item, category, status, price and days since delivery.
    """
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise ValueError(f"no order {order_id!r}")
    return json.dumps({"order_id": order.order_id, "item": order.item,
                       "category": order.category, "status": order.status,
                       "price": order.price, "days_since_delivery": order.days_since_delivery})


def return_policy(category: str) -> str:
    """The shop's return policy for a category of items.

    Args:
        category: electronics, clothing or books

    Returns:
        The policy as JSON: return window in days and restocking fee in percent.
    """
    policy = POLICY.get(category.strip().lower())
    if policy is None:
        raise ValueError(f"no policy for category {category!r}")
    return json.dumps({"category": category.strip().lower(), **policy})


def compute_refund(price: float, restocking_fee_percent: float) -> str:
    """The amount refunded for a returned item.

    Args:
        price: what the customer paid
        restocking_fee_percent: the fee the shop keeps, in percent of the price

    Returns:
        The refund, with two decimals.
    """
    if not 0 <= restocking_fee_percent <= 100:
        raise ValueError(f"a fee of {restocking_fee_percent}% is not a percentage")
    return f"{price * (100 - restocking_fee_percent) / 100:.2f}"


TOOLS = [lookup_order, return_policy, compute_refund]


def returnable(order: Order) -> bool:
    """Whether a delivered order is still inside its category's return window."""
    window = POLICY[order.category]["return_days"]
    return order.days_since_delivery is not None and order.days_since_delivery <= window
