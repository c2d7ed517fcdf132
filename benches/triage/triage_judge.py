"""The verifier: a simulated LLM judge that scores "does this tool answer this ticket?".

It stands in for a model call, so it is imperfect in the ways a judge is:

- it knows each tool through a *rubric* of cue phrases, written from the shared and
  dev phrasings (the judge's "training data"); phrasing it has not seen earns no cue;
- it is confused when the ticket also cues a rival tool ("charged" is a refund cue,
  learned from dev slang, but a held-out ticket asks whether a charge went through);
- it is noisy: every call adds Gaussian noise drawn from the attempt's seeded RNG.

It never reads the task's expected answer or tools. The score is
``0.35 + 0.15·own − 0.1·rival (+0.05 for a clean read-only result) + noise``, with
``own`` and ``rival`` the cue weights (at most 3) of the tool and of its strongest rival.
The agent accepts when the score reaches ``judge_threshold``.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

__all__ = ["RUBRIC", "cue_hits", "judge_score"]

NOISE_SD = 0.15
CAP = 3  # cue weight beyond this adds no confidence

#: Cue phrases (regexes on the lower-cased ticket) and their weights: 2 names the tool's
#: job outright, 1 merely points at it. Written from shared and dev phrasing, plus the
#: common synonyms a language model knows ("reimburse", "voucher", "credentials").
RUBRIC: dict[str, tuple[tuple[str, int], ...]] = {
    "get_order_status": (("status", 1), ("processed", 1), ("still pending", 2),
                         ("status of order", 2), ("status update", 2), ("any news", 2),
                         ("sup with", 2), ("nothing happened", 2), ("stage", 1)),
    "get_order_details": (("items in", 2), ("total of", 1), ("details of", 2)),
    "list_customer_orders": (("my orders", 2), ("all orders", 2)),
    "track_shipment": (("tracking", 2), ("track", 1), ("carrier", 2), ("parcel", 1),
                       ("stuff", 2), ("follow my package", 1), ("courier", 1)),
    "get_delivery_estimate": (("when will", 1), ("arrive", 1), ("delivery date", 2),
                              ("estimated", 2), (r"\beta\b", 2), ("by the weekend", 1)),
    "check_stock": (("in stock", 2), ("available", 1), ("units", 1), ("got any", 2),
                    (r" left\b", 1), ("or nah", 2)),
    "get_product_price": (("price", 2), ("cost", 1), ("how much does", 1), ("bucks", 2)),
    "get_product_info": (("product info", 2), ("category of", 2)),
    "get_warranty_info": (("warranty", 2),),
    "search_products": (("search", 2),),
    "convert_currency": (("convert", 2), ("swap", 1),
                         (r"\d (usd|eur|gbp|jpy|cad|dollars|euros|pounds|yen)\b.* (in|into|to) ",
                          2)),
    "get_exchange_rate": (("exchange rate", 2), ("rate between", 2)),
    "get_payment_status": (("payment status", 2), ("go through", 2), ("captured", 2),
                           ("did the payment", 2), ("card payment", 1), ("went wrong", 1)),
    "retry_payment": (("retry", 2), ("again", 1), ("declined", 2), (r"\bfail", 1)),
    "refund_order": (("full refund", 2), ("refund my order", 2), ("whole thing", 2),
                     ("full amount", 2), ("money back", 2), ("charged", 1), ("junk", 1),
                     ("trash", 1), ("refund", 1), ("reimburse", 1)),
    "refund_item": (("refund only", 2), ("one item", 2), ("the rest is fine", 2),
                    ("just one", 1), ("refund", 1)),
    "get_refund_status": (("been issued", 2), ("how much was refunded", 2),
                          ("refunded on", 2), ("my refund", 1)),
    "cancel_order": (("cancel", 2), ("scrap", 2), ("dont want", 1), ("nvm", 2),
                     ("wrong size", 1)),
    "change_shipping_address": (("delivery address", 2), ("ship order", 2),
                                (r"send \d+ to", 2), ("moved", 1), ("instead", 1)),
    "update_account_address": (("my account", 1), ("profile address", 2),
                               ("address on my account", 2)),
    "update_email": (("email address", 2),),
    "reset_password": (("password", 2), ("reset", 1), (r" pw\b", 2), ("cant remember", 1),
                       ("login", 1), ("credentials", 1)),
    "unlock_account": (("unlock", 2), ("locked", 2), ("login attempts", 2), ("frozen", 1)),
    "get_customer_profile": (("membership", 2), ("tier", 2)),
    "get_loyalty_points": (("loyalty points", 2), ("points balance", 2), ("points", 1),
                           ("reward", 1)),
    "redeem_loyalty_points": (("redeem", 2),),
    "check_promo_code": (("promo code", 2), ("still valid", 2), ("discount does", 2),
                         ("code", 1), ("voucher", 1)),
    "apply_promo_code": (("apply the code", 2), ("apply code", 2)),
    "get_return_policy": (("return policy", 2), ("days do i have to return", 2), ("policy", 1)),
    "create_return_label": (("return label", 2), ("prepaid label", 2), ("label", 1)),
    "escalate_to_human": (("manager", 2), ("complaint", 2), ("human", 2), ("lawyer", 2),
                          ("unacceptable", 1)),
    "unsubscribe_newsletter": (("unsubscribe", 2), ("newsletter", 2)),
}
_PATTERNS = {tool: [(re.compile(c), w) for c, w in cues] for tool, cues in RUBRIC.items()}
# Words the judge reads through typos, as a model would: "refnud" is read as "refund".
_VOCAB = sorted({w for cues in RUBRIC.values() for c, _ in cues
                 for w in re.findall(r"[a-z]{5,}", c)})


def _fix(word: str) -> str:
    if len(word) < 5 or word in _VOCAB:
        return word
    for v in _VOCAB:
        if len(v) == len(word) and sorted(v) == sorted(word) and \
                sum(a != b for a, b in zip(v, word, strict=True)) == 2:
            return v  # two letters swapped
        if len(v) == len(word) + 1 and any(v[:i] + v[i + 1:] == word for i in range(len(v))):
            return v  # one letter dropped
    return word


@lru_cache(maxsize=4096)
def cue_hits(text: str) -> dict[str, int]:
    """Per tool, the summed weight of its rubric cues in the (typo-corrected) ticket."""
    low = re.sub(r"[a-z]+", lambda m: _fix(m.group()), text.lower().replace("'", ""))
    low = " " + low
    return {tool: sum(w for p, w in pats if p.search(low)) for tool, pats in _PATTERNS.items()}


def judge_score(text: str, tool: str, rng: random.Random, *, result_ok: bool = False) -> float:
    """One judge call: how well ``tool`` fits the ticket, with the call's own noise."""
    hits = cue_hits(text)
    own = min(hits.get(tool, 0), CAP)
    rival = min(max((n for t, n in hits.items() if t != tool), default=0), CAP)
    base = 0.35 + 0.15 * own - 0.1 * rival + (0.05 if result_ok else 0.0)
    return base + rng.gauss(0.0, NOISE_SD)
