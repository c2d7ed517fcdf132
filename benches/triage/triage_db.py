"""The triage shop's SQLite database: generated deterministically, copied per attempt.

The template database is built once per process from a fixed seed (customers,
products, stock, orders, order lines, shipments, payments, refunds, exchange rates,
promo codes) and every attempt gets its own in-memory copy through
:meth:`sqlite3.Connection.backup` (tens of microseconds), so one attempt's refunds
and cancellations are never seen by another.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
import threading

__all__ = ["DB_SEED", "TODAY", "build_database", "day_text", "fresh_connection", "template"]

#: The generator's seed. Changing it changes every expected answer: regenerate the tickets.
DB_SEED = 20240611
#: "Today" in the shop's world, a fixed date so answers never depend on the wall clock.
TODAY = dt.date(2025, 3, 14)

SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT, country TEXT,
    currency TEXT, tier TEXT, address TEXT, locked INTEGER, loyalty_points INTEGER);
CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT, category TEXT, price_usd REAL,
    warranty_months INTEGER);
CREATE TABLE stock (sku TEXT, warehouse TEXT, qty INTEGER, PRIMARY KEY (sku, warehouse));
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, status TEXT,
    placed_day INTEGER, currency TEXT, total REAL, ship_address TEXT, promo_code TEXT);
CREATE TABLE order_lines (order_id INTEGER, sku TEXT, qty INTEGER, unit_price REAL,
    PRIMARY KEY (order_id, sku));
CREATE TABLE shipments (order_id INTEGER PRIMARY KEY, carrier TEXT, tracking TEXT,
    status TEXT, eta_day INTEGER);
CREATE TABLE payments (order_id INTEGER PRIMARY KEY, amount REAL, method TEXT, status TEXT);
CREATE TABLE refunds (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id INTEGER, sku TEXT,
    amount REAL, reason TEXT);
CREATE TABLE rates (currency TEXT PRIMARY KEY, per_usd REAL);
CREATE TABLE promo_codes (code TEXT PRIMARY KEY, percent INTEGER, active INTEGER);
CREATE TABLE password_resets (id INTEGER PRIMARY KEY AUTOINCREMENT, customer_id INTEGER,
    token TEXT);
CREATE TABLE escalations (id INTEGER PRIMARY KEY AUTOINCREMENT, customer_id INTEGER,
    reason TEXT);
CREATE TABLE return_labels (order_id INTEGER PRIMARY KEY, label TEXT);
"""

FIRST = ["Ada", "Ben", "Chloe", "Dev", "Elif", "Farah", "Gus", "Hana", "Ivan", "Jun", "Kofi",
         "Lena", "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara", "Uma",
         "Victor", "Wen", "Xavi", "Yara", "Zane"]
LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Haddad", "Kowalski",
        "Reyes", "Schmidt", "Osei", "Ivanova", "Brennan", "Costa", "Nakamura", "Dubois"]
COUNTRIES = {"US": "USD", "DE": "EUR", "FR": "EUR", "GB": "GBP", "JP": "JPY", "CA": "CAD"}
STREETS = ["Elm Street", "Harbour Road", "Mill Lane", "Station Avenue", "Oak Drive",
           "King Street", "Canal Walk", "Birch Close", "Market Square", "Hill Road"]
CITIES = ["Springfield", "Leeds", "Lyon", "Hamburg", "Osaka", "Toronto", "Austin", "Bristol"]
CATEGORIES = {
    "kitchen": ["kettle", "toaster", "blender", "coffee grinder", "rice cooker"],
    "audio": ["headphones", "bluetooth speaker", "earbuds", "soundbar"],
    "home": ["desk lamp", "air purifier", "humidifier", "robot vacuum"],
    "outdoor": ["tent", "sleeping bag", "camping stove", "headlamp"],
    "office": ["office chair", "monitor arm", "standing desk", "webcam"],
}
COLOURS = ["blue", "red", "matte black", "white", "green", "silver"]
WAREHOUSES = ["north", "south", "east"]
RATES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 149.5, "CAD": 1.36}
CARRIERS = ["UPS", "DHL", "FedEx", "Royal Mail"]
# Weighted so that each kind of ticket finds orders it can act on.
STATUSES = ["pending"] * 3 + ["processing"] * 3 + ["shipped"] * 4 + ["delivered"] * 5 + [
    "cancelled"]

N_CUSTOMERS = 160
ORDERS_PER_CUSTOMER = (1, 5)


def day_text(day: int) -> str:
    """An ISO date for a day offset from :data:`TODAY`."""
    return (TODAY + dt.timedelta(days=day)).isoformat()


def _address(rng: random.Random) -> str:
    return f"{rng.randint(1, 240)} {rng.choice(STREETS)}, {rng.choice(CITIES)}"


def _products(rng: random.Random) -> list[tuple[str, str, str, float, int]]:
    rows = []
    number = 1001
    for category, kinds in CATEGORIES.items():
        for kind in kinds:
            for colour in rng.sample(COLOURS, 2):
                price = round(rng.uniform(12, 320), 2)
                rows.append((f"SKU-{number}", f"{colour} {kind}", category, price,
                             rng.choice([6, 12, 24, 36])))
                number += rng.randint(1, 7)  # sparse codes: a typo'd SKU rarely exists
    return rows


def build_database(seed: int = DB_SEED) -> sqlite3.Connection:
    """A new in-memory database filled from ``seed``; the same seed gives the same rows."""
    rng = random.Random(seed)
    con = sqlite3.connect(":memory:", check_same_thread=False)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO rates VALUES (?, ?)", RATES.items())
    products = _products(rng)
    con.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?)", products)
    for sku, *_ in products:
        for warehouse in WAREHOUSES:
            qty = 0 if rng.random() < 0.3 else rng.randint(1, 60)
            con.execute("INSERT INTO stock VALUES (?, ?, ?)", (sku, warehouse, qty))
    con.executemany("INSERT INTO promo_codes VALUES (?, ?, ?)",
                    [("SPRING10", 10, 1), ("WELCOME15", 15, 1), ("VIP20", 20, 1),
                     ("WINTER25", 25, 0), ("BLACKFRI", 30, 0)])
    order_id = 10000
    for cid in range(1, N_CUSTOMERS + 1):
        country = rng.choice(list(COUNTRIES))
        currency = COUNTRIES[country]
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        email = f"{name.split()[0].lower()}.{cid}@example.com"
        con.execute("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (cid, name, email, country, currency, rng.choice(["basic", "plus", "vip"]),
                     _address(rng), int(rng.random() < 0.25), rng.randint(0, 40) * 50))
        for _ in range(rng.randint(*ORDERS_PER_CUSTOMER)):
            order_id += rng.randint(3, 40)  # gaps: a mistyped order id rarely exists
            _add_order(con, rng, order_id, cid, currency, products)
    con.commit()
    return con


def _add_order(con: sqlite3.Connection, rng: random.Random, order_id: int, cid: int,
               currency: str, products: list[tuple[str, str, str, float, int]]) -> None:
    status = rng.choice(STATUSES)
    placed = -rng.randint(1, 60)
    rate = RATES[currency]
    total = 0.0
    for product in rng.sample(products, rng.randint(1, 3)):
        qty = rng.randint(1, 3)
        unit = round(product[3] * rate, 2)
        total += unit * qty
        con.execute("INSERT INTO order_lines VALUES (?, ?, ?, ?)", (order_id, product[0], qty,
                                                                     unit))
    total = round(total, 2)
    con.execute("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                (order_id, cid, status, placed, currency, total, _address(rng)))
    pay_status = "failed" if status == "pending" and rng.random() < 0.4 else (
        "refunded" if status == "cancelled" else "captured")
    con.execute("INSERT INTO payments VALUES (?, ?, ?, ?)",
                (order_id, total, rng.choice(["card", "paypal", "giftcard"]), pay_status))
    if status in ("shipped", "delivered"):
        carrier = rng.choice(CARRIERS)
        tracking = f"{carrier[:2].upper()}{rng.randint(10**8, 10**9 - 1)}"
        eta = placed + rng.randint(3, 9) if status == "delivered" else rng.randint(1, 6)
        con.execute("INSERT INTO shipments VALUES (?, ?, ?, ?, ?)",
                    (order_id, carrier, tracking,
                     "delivered" if status == "delivered" else "in_transit", eta))
    if status == "cancelled":
        con.execute("INSERT INTO refunds (order_id, sku, amount, reason) VALUES (?, NULL, ?, ?)",
                    (order_id, total, "cancelled"))


_template: sqlite3.Connection | None = None
_lock = threading.Lock()


def template() -> sqlite3.Connection:
    """The process-wide template database (built on first use; never written to)."""
    global _template
    with _lock:
        if _template is None:
            _template = build_database()
        return _template


def fresh_connection() -> sqlite3.Connection:
    """A private in-memory copy of the template for one attempt."""
    con = sqlite3.connect(":memory:", check_same_thread=False)
    src = template()
    with _lock:  # one reader of the template at a time: backup is not re-entrant
        src.backup(con)
    con.row_factory = sqlite3.Row
    return con
