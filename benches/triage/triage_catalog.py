"""The triage tool catalogue: names, descriptions, typed arguments, side effects, prices.

Descriptions are what retrieval searches, so they are written the way a real tool
catalogue is: some tools are confusable by their descriptions (order status and
order details, a shipment's tracking number and its delivery estimate, refunding an
order and refunding one item, an order's shipping address and the account's
address), which is exactly where a narrow search or a hot sampler goes wrong.
The implementations live in :mod:`triage_tools`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CATALOG", "ArgSpec", "ToolSpec"]


@dataclass(frozen=True)
class ArgSpec:
    """One typed argument: ``kind`` is int, float or str; ``pattern`` a regex for str."""

    kind: str
    required: bool = True
    pattern: str | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the agent sees it, plus what running it costs.

    ``side_effect`` tools write to the database; executing one the ticket did not ask
    for is a harmful action. ``answer`` names the result field the agent reports.
    """

    name: str
    description: str
    args: dict[str, ArgSpec] = field(default_factory=dict)
    side_effect: bool = False
    cost: float = 0.0004
    latency_ms: float = 40.0
    answer: str = "answer"


ORDER = ArgSpec("int")
CUSTOMER = ArgSpec("int")
SKU = ArgSpec("str", pattern=r"SKU-\d{4}")
CURRENCY = ArgSpec("str", pattern=r"[A-Z]{3}")
ADDRESS = ArgSpec("str", pattern=r"\d{1,4} \w+ \w+, \w+")
REASON = ArgSpec("str", required=False)

_TOOLS = [
    ToolSpec("get_order_status", "Look up the current status of an order: pending, processing, "
             "shipped, delivered or cancelled.", {"order_id": ORDER}, answer="status"),
    ToolSpec("get_order_details", "Show the items, quantities and total amount of an order.",
             {"order_id": ORDER}, answer="total"),
    ToolSpec("list_customer_orders", "List all orders placed by the customer account.",
             {"customer_id": CUSTOMER}, answer="count"),
    ToolSpec("track_shipment", "Track a shipped parcel: carrier and tracking number of an "
             "order's delivery.", {"order_id": ORDER}, answer="tracking"),
    ToolSpec("get_delivery_estimate", "Estimated delivery date (ETA) of an order's shipment: "
             "when will the parcel arrive.", {"order_id": ORDER}, answer="eta"),
    ToolSpec("check_stock", "Check whether a product is in stock and how many units are "
             "available in the warehouses.", {"sku": SKU}, answer="available"),
    ToolSpec("get_product_price", "Get the current price of a product: how much it costs in "
             "US dollars.", {"sku": SKU}, answer="price_usd"),
    ToolSpec("get_product_info", "Product information: name, category and description of a "
             "product.", {"sku": SKU}, answer="name"),
    ToolSpec("get_warranty_info", "How long the warranty of a product lasts, in months.",
             {"sku": SKU}, answer="warranty_months"),
    ToolSpec("search_products", "Search the product catalogue by keywords and return matching "
             "products.", {"query": ArgSpec("str")}, answer="count"),
    ToolSpec("convert_currency", "Convert an amount of money from one currency to another "
             "(USD, EUR, GBP, JPY, CAD) at today's exchange rate.",
             {"amount": ArgSpec("float"), "from_currency": CURRENCY, "to_currency": CURRENCY},
             answer="converted"),
    ToolSpec("get_exchange_rate", "Get the exchange rate between two currencies.",
             {"from_currency": CURRENCY, "to_currency": CURRENCY}, answer="rate"),
    ToolSpec("get_payment_status", "Check the payment status of an order: captured, failed or "
             "refunded, and why a charge failed.", {"order_id": ORDER}, answer="status"),
    ToolSpec("retry_payment", "Retry a failed card payment for an order and charge the "
             "customer again.", {"order_id": ORDER}, side_effect=True, answer="status"),
    ToolSpec("refund_order", "Refund the full amount of an order's payment back to the "
             "customer.", {"order_id": ORDER, "reason": REASON}, side_effect=True,
             answer="refunded"),
    ToolSpec("refund_item", "Refund a single item (one product line) of an order, not the "
             "whole order.", {"order_id": ORDER, "sku": SKU}, side_effect=True,
             answer="refunded"),
    ToolSpec("get_refund_status", "Check whether a refund was issued for an order and how much "
             "was refunded.", {"order_id": ORDER}, answer="refunded"),
    ToolSpec("cancel_order", "Cancel an order that has not shipped yet.",
             {"order_id": ORDER, "reason": REASON}, side_effect=True, answer="status"),
    ToolSpec("change_shipping_address", "Change the delivery address of an order that has not "
             "shipped yet.", {"order_id": ORDER, "address": ADDRESS}, side_effect=True,
             answer="address"),
    ToolSpec("update_account_address", "Update the default address saved on the customer's "
             "account profile.", {"customer_id": CUSTOMER, "address": ADDRESS},
             side_effect=True, answer="address"),
    ToolSpec("update_email", "Change the email address of the customer's account.",
             {"customer_id": CUSTOMER, "email": ArgSpec("str", pattern=r"\S+@\S+")},
             side_effect=True, answer="email"),
    ToolSpec("reset_password", "Send a password reset link to the customer's email so they "
             "can log in again.", {"customer_id": CUSTOMER}, side_effect=True,
             answer="status"),
    ToolSpec("unlock_account", "Unlock a customer account that was locked after too many "
             "failed login attempts.", {"customer_id": CUSTOMER}, side_effect=True,
             answer="status"),
    ToolSpec("get_customer_profile", "Show the customer's account profile: name, email, "
             "membership tier.", {"customer_id": CUSTOMER}, answer="tier"),
    ToolSpec("get_loyalty_points", "Show the loyalty points balance of the customer.",
             {"customer_id": CUSTOMER}, answer="points"),
    ToolSpec("redeem_loyalty_points", "Redeem loyalty points of the customer for store credit.",
             {"customer_id": CUSTOMER, "points": ArgSpec("int")}, side_effect=True,
             answer="credit"),
    ToolSpec("check_promo_code", "Check whether a promo or discount code is valid and what "
             "percentage it takes off.", {"code": ArgSpec("str", pattern=r"[A-Z0-9]{4,12}")},
             answer="percent"),
    ToolSpec("apply_promo_code", "Apply a promo or discount code to a pending order.",
             {"order_id": ORDER, "code": ArgSpec("str", pattern=r"[A-Z0-9]{4,12}")},
             side_effect=True, answer="total"),
    ToolSpec("get_return_policy", "Return policy: how many days a product category can be "
             "returned after delivery.", {"category": ArgSpec("str")}, answer="days"),
    ToolSpec("create_return_label", "Create a prepaid return shipping label to send a "
             "delivered order back.", {"order_id": ORDER}, side_effect=True, answer="label"),
    ToolSpec("escalate_to_human", "Escalate the conversation to a human support agent: "
             "manager, formal complaint, lawyer or legal threat.",
             {"customer_id": CUSTOMER, "reason": REASON}, side_effect=True, cost=0.02,
             latency_ms=1500.0, answer="status"),
    ToolSpec("unsubscribe_newsletter", "Unsubscribe the customer from marketing emails and "
             "the newsletter.", {"customer_id": CUSTOMER}, side_effect=True, answer="status"),
]

#: name -> spec, in catalogue order (retrieval ties break by this order).
CATALOG: dict[str, ToolSpec] = {t.name: t for t in _TOOLS}
