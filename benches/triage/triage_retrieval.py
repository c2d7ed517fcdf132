"""Tool retrieval over the catalogue's names and descriptions: bm25, tfidf or hybrid.

- ``bm25``: Okapi BM25 over word tokens (k1 1.2, b 0.75). Exact words only, so a
  typo in the one word that names the tool ("refnud") loses it.
- ``tfidf``: cosine of sublinear tf-idf vectors; length-normalised, so short
  descriptions win more often than under bm25.
- ``hybrid``: spell-corrects the query against the catalogue's vocabulary (edit
  distance 1 on words of 5+ letters), then mixes bm25 with character-trigram
  cosine; robust to typos, a little slower.

``query_expansion`` (used by the agent on retries) appends synonyms from a
hand-written thesaurus, :data:`SYNONYMS`. The keyword router's table, :data:`ROUTES`, is another
matter: it was mined from the dev tickets' slang, is right on dev, and misroutes
phrasing it was not mined from. Rankings are pure functions of (query, mode,
expansion) and cached.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache

from triage_catalog import CATALOG

__all__ = ["MODES", "ROUTES", "SYNONYMS", "expand", "rank", "route", "tokens"]

MODES = ("bm25", "tfidf", "hybrid")
STOP = frozenset((
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "my", "me", "i", "is", "it",
    "its", "at", "by", "be", "can", "you", "your", "with", "this", "that", "was", "are", "do",
    "does", "did", "have", "has", "had", "from", "as", "so", "if", "not", "no", "but", "what",
    "which", "when", "how", "will", "would", "could", "please", "need", "want", "get", "got",
    "just", "about", "there", "their", "they", "we", "our", "us", "im", "ive", "any", "some",
    "all", "been", "being", "also", "than", "then", "them", "more", "out", "up"))

#: A hand-written thesaurus of paraphrases and common slang -> catalogue words.
SYNONYMS: dict[str, str] = {
    "package": "parcel shipment", "courier": "carrier tracking", "follow": "track",
    "reimburse": "refund", "money": "refund payment amount", "charge": "payment",
    "charged": "payment", "bounced": "failed payment", "voucher": "promo code",
    "coupon": "promo code", "frozen": "locked unlock", "credentials": "password login",
    "sign": "login", "reward": "loyalty points", "pay": "price", "cost": "price",
    "buy": "stock available", "sold": "stock available", "arrive": "delivery date",
    "here": "delivery", "stage": "status", "news": "status", "mind": "cancel",
    "stop": "cancel", "moved": "address", "office": "delivery address", "home": "address",
    "back": "return", "broken": "refund return", "piece": "item", "person": "human agent",
    "real": "human", "stuff": "order", "swap": "convert currency", "bucks": "price dollars",
    "declined": "failed payment", "scrap": "cancel", "pw": "password",
}

#: Keyword -> tool shortcuts mined from the *dev* tickets' slang (the keyword router).
#: They are right on dev; elsewhere the same words can mean something else.
ROUTES: tuple[tuple[str, str], ...] = (
    ("money back", "refund_order"), ("charged", "refund_order"), ("junk", "refund_order"),
    ("trash", "refund_order"), ("scrap", "cancel_order"), ("nvm", "cancel_order"),
    ("dont want", "cancel_order"), ("stuff", "track_shipment"),
    ("moved", "change_shipping_address"), ("cant remember", "reset_password"),
    ("pw", "reset_password"), ("acct", "unlock_account"), ("bucks", "get_product_price"),
    ("got any", "check_stock"), ("or nah", "check_stock"), ("swap", "convert_currency"),
    ("declined", "retry_payment"), ("any news", "get_order_status"),
    ("sup with", "get_order_status"), ("eta", "get_delivery_estimate"),
)


def route(text: str) -> str | None:
    """The tool the keyword router sends ``text`` to, or None when no keyword is in it."""
    low = re.sub(r"[^a-z0-9 ]", "", text.lower())
    for keyword, tool in ROUTES:
        if re.search(rf"\b{re.escape(keyword)}\b", low):
            return tool
    return None


def _stem(word: str) -> str:
    # Crude suffix stripping: enough for "refunded"/"refund", "units"/"unit".
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[: -len(suffix)]
            # "shipped" -> "shipp" -> "ship": undo the doubled consonant.
            return word[:-1] if len(word) > 3 and word[-1] == word[-2] != "s" else word
    return word


def tokens(text: str) -> list[str]:
    """Lower-cased, stemmed word tokens without stop words."""
    return [_stem(w) for w in re.findall(r"[a-z]+", text.lower().replace("'", ""))
            if w not in STOP]


def expand(text: str) -> str:
    """``text`` followed by the synonyms of every paraphrase word it contains."""
    extra = [SYNONYMS[w] for w in re.findall(r"[a-z]+", text.lower().replace("'", ""))
             if w in SYNONYMS]
    return " ".join([text, *extra])


class _Index:
    """Per-tool token statistics, built once per process."""

    def __init__(self) -> None:
        self.names = list(CATALOG)
        self.docs = [tokens(n.replace("_", " ") + " " + CATALOG[n].description)
                     for n in self.names]
        self.tf = [Counter(d) for d in self.docs]
        n = len(self.docs)
        df = Counter(w for d in self.docs for w in set(d))
        self.idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}
        self.avg_len = sum(len(d) for d in self.docs) / n
        self.vocab = sorted(df)
        self.tfidf = [self._unit({w: (1 + math.log(c)) * self.idf[w] for w, c in tf.items()})
                      for tf in self.tf]
        self.grams = [self._unit(Counter(g for w in d for g in _trigrams(w))) for d in self.docs]

    @staticmethod
    def _unit(vec: dict[str, float]) -> dict[str, float]:
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        return {k: v / norm for k, v in vec.items()}

    def bm25(self, query: list[str]) -> list[float]:
        k1, b = 1.2, 0.75
        out = []
        for tf, doc in zip(self.tf, self.docs, strict=True):
            norm = k1 * (1 - b + b * len(doc) / self.avg_len)
            out.append(sum(self.idf.get(w, 0.0) * tf[w] * (k1 + 1) / (tf[w] + norm)
                           for w in query if w in tf))
        return out

    def cosine(self, query: list[str]) -> list[float]:
        q = self._unit({w: (1 + math.log(c)) * self.idf[w]
                        for w, c in Counter(query).items() if w in self.idf})
        return [sum(v * d.get(w, 0.0) for w, v in q.items()) for d in self.tfidf]

    def trigram(self, query: list[str]) -> list[float]:
        q = self._unit(Counter(g for w in query for g in _trigrams(w)))
        return [sum(v * d.get(g, 0.0) for g, v in q.items()) for d in self.grams]

    def correct(self, word: str) -> str:
        """The vocabulary word one edit away from ``word`` (5+ letters), else ``word``."""
        if word in self.idf or len(word) < 5:
            return word
        for cand in self.vocab:
            if abs(len(cand) - len(word)) <= 1 and _one_edit(word, cand):
                return cand
        return word


def _trigrams(word: str) -> list[str]:
    w = f"#{word}#"
    return [w[i:i + 3] for i in range(len(w) - 2)]


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` becomes ``b`` by one deletion, insertion or adjacent swap."""
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] \
            and a[diff[1]] == b[diff[0]]
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


_INDEX: _Index | None = None


def _index() -> _Index:
    global _INDEX
    if _INDEX is None:
        _INDEX = _Index()
    return _INDEX


@lru_cache(maxsize=8192)
def rank(text: str, mode: str, expansion: bool) -> tuple[tuple[str, float], ...]:
    """Every tool with its score for ``text``, best first (ties in catalogue order)."""
    index = _index()
    query = tokens(expand(text) if expansion else text)
    if mode == "bm25":
        scores = index.bm25(query)
    elif mode == "tfidf":
        scores = index.cosine(query)
    elif mode == "hybrid":
        fixed = [index.correct(w) for w in query]
        lexical = index.bm25(fixed)
        top = max(lexical) or 1.0
        scores = [0.6 * s / top + 0.4 * g for s, g in zip(lexical, index.trigram(fixed),
                                                          strict=True)]
    else:
        raise ValueError(f"unknown retrieval mode {mode!r}; expected one of {MODES}")
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return tuple((index.names[i], scores[i]) for i in order)
