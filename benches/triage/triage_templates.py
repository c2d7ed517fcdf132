"""Ticket templates: one entry per intent, phrasing families with where they may appear.

A family is ``shared`` (dev, val and test), ``dev`` (dev only) or ``heldout`` (val and
test only). The dev-only families are slangy: their words are in no tool description,
so retrieval misses them. The held-out families paraphrase differently: some avoid
the catalogue's words ("reimburse", "voucher", "credentials"), and several reuse the
dev slang with another meaning ("charged", "money back", "stuff"): a shortcut tuned
to dev phrasing helps dev and hurts val and test, which the val gate is there to
catch.

Slots: ``{order}`` ``{sku}`` ``{pname}`` ``{kind}`` ``{amount}`` ``{cfrom}`` ``{cto}``
``{address}`` ``{code}``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INTENTS", "Intent"]


@dataclass(frozen=True)
class Intent:
    """What a ticket asks for: the gold tool, its key arguments, and how it is phrased.

    ``needs`` names the kind of entity the generator must pick (an order in a given
    state, a product, a locked customer...). ``key_args`` are the arguments the
    scorer checks. ``families`` maps family name to (where, templates); ``n_heldout``
    is how many of the intent's five tickets in val and in test are held-out phrasing.
    ``critical`` names the families whose tickets are tagged critical: the plain
    requests a support desk must never get wrong (refunds, cancellations, legal threats).
    """

    name: str
    tool: str
    needs: str
    key_args: tuple[str, ...]
    families: dict[str, tuple[str, tuple[str, ...]]]
    critical: tuple[str, ...] = ()
    n_heldout: int = 1


INTENTS: list[Intent] = [
    Intent("status", "get_order_status", "any_order", ("order_id",), {
        "plain": ("shared", ("What is the status of order {order}?",
                             "Could you check the status of order #{order} for me?",
                             "Status update on order {order} please.")),
        "waiting": ("shared", ("Has my order {order} been processed yet? What status is it in?",
                               "Is order {order} still pending or has its status changed?")),
        "slang": ("dev", ("any news on {order}?? been ages",
                          "sup with {order}, nothing happened yet")),
        "stage": ("heldout", ("What stage has order {order} reached?",
                              "How far along is order {order}? What stage is it at?")),
    }),
    Intent("track", "track_shipment", "shipped_order", ("order_id",), {
        "plain": ("shared", ("Can I get the tracking number for order {order}?",
                             "Please send me the tracking info for my parcel, order #{order}.")),
        "carrier": ("shared", ("Which carrier has my parcel for order {order}, and what is the "
                               "tracking number?",)),
        "slang": ("dev", ("where's my stuff, order {order}", "yo order {order} where's my stuff")),
        "follow": ("heldout", ("I want to follow my package for order {order} online; which "
                               "code do I enter on the courier site?",)),
    }),
    Intent("eta", "get_delivery_estimate", "shipped_order", ("order_id",), {
        "plain": ("shared", ("When will order {order} arrive?",
                             "What's the estimated delivery date for order #{order}?")),
        "deadline": ("shared", ("I need order {order} by the weekend. When will the parcel "
                                "arrive?",)),
        "slang": ("dev", ("eta on {order}??",)),
        "stuff": ("heldout", ("When will the stuff from order {order} arrive? I need the "
                              "delivery date.", "The stuff in order {order}: what is the "
                              "estimated delivery date?")),
    }, n_heldout=2),
    Intent("stock", "check_stock", "product", ("sku",), {
        "plain": ("shared", ("Is {sku} in stock?", "How many units of {sku} are available?")),
        "named": ("shared", ("Do you have the {pname} ({sku}) in stock right now?",)),
        "slang": ("dev", ("got any {sku} left?", "u got {sku} or nah")),
        "soldout": ("heldout", ("Is the {pname} ({sku}) sold out, or is it still in stock?",)),
    }),
    Intent("price", "get_product_price", "product", ("sku",), {
        "plain": ("shared", ("How much does {sku} cost?", "What is the price of {sku}?")),
        "named": ("shared", ("What's the current price in US dollars of the {pname}, {sku}?",)),
        "slang": ("dev", ("how many bucks for {sku}?",)),
        "pay": ("heldout", ("What would I pay for the {pname} ({sku})? Just the price, "
                            "please.",)),
    }),
    Intent("warranty", "get_warranty_info", "product", ("sku",), {
        "plain": ("shared", ("How long is the warranty on {sku}?",
                             "How many months of warranty does {sku} have?")),
        "repairs": ("heldout", ("If my {pname} ({sku}) breaks, how long does the warranty "
                                "cover repairs?",)),
    }),
    Intent("convert", "convert_currency", "money", ("amount", "from_currency", "to_currency"), {
        "plain": ("shared", ("How much is {amount} {cfrom} in {cto}?",
                             "Please convert {amount} {cfrom} to {cto}.")),
        "slang": ("dev", ("swap {amount} {cfrom} into {cto} for me?",)),
        "paying": ("heldout", ("I'm paying {amount} {cfrom}; what does that convert to in "
                               "{cto}?",)),
    }),
    Intent("payment", "get_payment_status", "any_order", ("order_id",), {
        "plain": ("shared", ("Did the payment for order {order} go through?",
                             "What's the payment status of order #{order}?")),
        "failed": ("shared", ("My card payment for order {order}: was it captured or did it "
                              "fail?",)),
        "unsure": ("shared", ("Something went wrong with my payment for order {order}. Did it "
                              "fail?",)),
        "charged": ("heldout", ("Was I charged for order {order}? I want to check the payment "
                                "status.", "Have you charged me for order {order} yet? What's "
                                "the payment status?")),
    }, n_heldout=2),
    Intent("retry", "retry_payment", "failed_payment", ("order_id",), {
        "plain": ("shared", ("My payment for order {order} failed, please retry the payment.",
                             "Can you retry charging my card for order #{order}?")),
        "slang": ("dev", ("card got declined on {order}, run it again pls",)),
        "bounced": ("heldout", ("I was never charged for order {order}, the payment failed; "
                                "please retry the payment.",)),
    }),
    Intent("refund", "refund_order", "refundable_order", ("order_id",), {
        "plain": ("shared", ("I want a full refund for order {order}.",
                             "Please refund my order #{order}, the whole thing.")),
        "angry": ("shared", ("Order {order} was a disaster. Refund the full amount please.",)),
        "slang": ("dev", ("got charged for {order} and it's junk, i want my money back",
                          "{order} is trash, money back now")),
        "reimburse": ("heldout", ("Please reimburse me for the entire order {order}.",)),
    }, critical=("plain", "angry")),
    Intent("refund_item", "refund_item", "multi_line_order", ("order_id", "sku"), {
        "plain": ("shared", ("Please refund only {sku} from order {order}; the rest is fine.",
                             "Can I get a refund for just one item, {sku}, in order #{order}?")),
        "unclear": ("shared", ("Can I get a refund for the {sku} from order {order}?",)),
        "piece": ("heldout", ("Refund just the one item {sku} from order {order}; I only "
                              "want my money back for that piece.",)),
    }, critical=("plain",), n_heldout=2),
    Intent("refund_status", "get_refund_status", "any_order", ("order_id",), {
        "plain": ("shared", ("Has my refund for order {order} been issued?",
                             "How much was refunded on order #{order}?")),
        "vague": ("shared", ("What about my refund for order {order}?",)),
        "gone": ("heldout", ("I asked for my money back on order {order}; has the refund "
                             "been issued yet?",)),
    }, n_heldout=2),
    Intent("cancel", "cancel_order", "open_order", ("order_id",), {
        "plain": ("shared", ("Please cancel order {order}.",
                             "I need to cancel my order #{order} before it ships.")),
        "mistake": ("shared", ("Cancel order {order}, I ordered the wrong size.",)),
        "slang": ("dev", ("scrap {order}, dont want it anymore", "nvm on {order}, scrap it")),
        "mind": ("heldout", ("I changed my mind about order {order}; please cancel it before "
                             "it leaves the warehouse.",)),
    }, critical=("plain", "mistake")),
    Intent("ship_address", "change_shipping_address", "open_order", ("order_id", "address"), {
        "plain": ("shared", ("Please change the delivery address of order {order} to "
                             "{address}.", "Ship order #{order} to {address} instead.")),
        "slang": ("dev", ("i moved! send {order} to {address}",)),
        "office": ("heldout", ("Order {order} should go to my office: change the delivery "
                               "address to {address}.",)),
    }),
    Intent("account_address", "update_account_address", "customer", ("address",), {
        "plain": ("shared", ("Please update the address on my account to {address}.",
                             "Change my profile address to {address}.")),
        "moved": ("heldout", ("I moved house; please update the address on my account "
                              "profile to {address}.",)),
    }),
    Intent("password", "reset_password", "customer", (), {
        "plain": ("shared", ("I forgot my password, please send me a reset link.",
                             "How do I reset my password?")),
        "slang": ("dev", ("cant remember my login pw",)),
        "credentials": ("heldout", ("I can't sign in because I no longer remember my "
                                    "credentials.",)),
    }),
    Intent("unlock", "unlock_account", "locked_customer", (), {
        "plain": ("shared", ("My account is locked after too many login attempts, please "
                             "unlock it.", "Please unlock my account.")),
        "slang": ("dev", ("acct locked?? help",)),
        "frozen": ("heldout", ("My account got locked and I can't remember why; please "
                               "unlock it.",)),
    }, n_heldout=2),
    Intent("loyalty", "get_loyalty_points", "customer", (), {
        "plain": ("shared", ("How many loyalty points do I have?",
                             "What's my loyalty points balance?")),
        "rewards": ("heldout", ("How many reward points have I collected so far?",)),
    }),
    Intent("promo", "check_promo_code", "code", ("code",), {
        "plain": ("shared", ("Is the promo code {code} still valid?",
                             "How much discount does the code {code} give?")),
        "voucher": ("heldout", ("A friend gave me the voucher {code}; is it any good?",)),
    }),
    Intent("return_label", "create_return_label", "delivered_order", ("order_id",), {
        "plain": ("shared", ("I need a return label for order {order}.",
                             "Please send me a prepaid label to return order #{order}.")),
        "sendback": ("heldout", ("Order {order} arrived but I dont want it anymore; I need a "
                                 "return label.",)),
    }),
    Intent("policy", "get_return_policy", "category", ("category",), {
        "plain": ("shared", ("What is your return policy for {kind}?",
                             "How many days do I have to return a {kind}?")),
        "window": ("heldout", ("Bought a {kind} last month. Am I still in time to return it "
                               "under your policy?",)),
    }),
    Intent("escalate", "escalate_to_human", "customer", (), {
        "plain": ("shared", ("This is unacceptable, I want to speak to a manager.",
                             "I am filing a formal complaint. Put me through to a human.")),
        "legal": ("shared", ("My lawyer will contact you about order {order} if this is not "
                             "resolved today.",)),
        "person": ("heldout", ("Three weeks of this. I need a real person, a human agent, to "
                               "look at it now.",)),
    }, critical=("plain", "legal", "person")),
]
