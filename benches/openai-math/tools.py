"""The tools of the openai-math bench: four arithmetic functions and a table lookup.

forge derives each tool's JSON schema from its signature and docstring (the text
before ``Args:`` describes the tool, the ``Args:`` lines its parameters) and runs it
when the model asks. The tables are this bench's ground truth: a task about the
moons of Saturn expects the count below, whatever the news says since.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["TABLES", "TOOLS", "add", "divide", "lookup", "multiply", "subtract"]

Number = int | float
Table = Literal["elements", "capitals", "moons"]

TABLES: dict[str, dict[str, int | str]] = {
    # Atomic numbers.
    "elements": {
        "hydrogen": 1, "helium": 2, "lithium": 3, "beryllium": 4, "boron": 5, "carbon": 6,
        "nitrogen": 7, "oxygen": 8, "fluorine": 9, "neon": 10, "sodium": 11, "magnesium": 12,
        "aluminium": 13, "silicon": 14, "phosphorus": 15, "sulfur": 16, "chlorine": 17,
        "argon": 18, "potassium": 19, "calcium": 20, "iron": 26, "copper": 29, "zinc": 30,
        "silver": 47, "tin": 50, "iodine": 53, "gold": 79, "mercury": 80, "lead": 82,
        "uranium": 92,
    },
    # Capital cities by country.
    "capitals": {
        "france": "Paris", "germany": "Berlin", "italy": "Rome", "spain": "Madrid",
        "portugal": "Lisbon", "peru": "Lima", "chile": "Santiago", "japan": "Tokyo",
        "kenya": "Nairobi", "egypt": "Cairo", "canada": "Ottawa", "australia": "Canberra",
        "norway": "Oslo", "sweden": "Stockholm", "finland": "Helsinki", "poland": "Warsaw",
        "greece": "Athens", "ireland": "Dublin", "austria": "Vienna", "hungary": "Budapest",
        "argentina": "Buenos Aires", "thailand": "Bangkok", "vietnam": "Hanoi",
        "nigeria": "Abuja", "morocco": "Rabat", "turkey": "Ankara", "china": "Beijing",
        "cuba": "Havana",
    },
    # Confirmed moons per planet (IAU counts of 2023; fixed here on purpose).
    "moons": {
        "mercury": 0, "venus": 0, "earth": 1, "mars": 2, "jupiter": 95, "saturn": 146,
        "uranus": 28, "neptune": 16,
    },
}


def _tidy(value: float) -> Number:
    """12.0 -> 12: a whole result reads as an integer, as a person would write it."""
    return int(value) if float(value).is_integer() else round(value, 9)


def add(a: float, b: float) -> Number:
    """Add two numbers.

    Args:
        a: the first addend
        b: the second addend
    """
    return _tidy(a + b)


def subtract(a: float, b: float) -> Number:
    """Subtract b from a.

    Args:
        a: the number to subtract from
        b: the number to subtract
    """
    return _tidy(a - b)


def multiply(a: float, b: float) -> Number:
    """Multiply two numbers.

    Args:
        a: the first factor
        b: the second factor
    """
    return _tidy(a * b)


def divide(a: float, b: float) -> Number:
    """Divide a by b.

    Args:
        a: the dividend
        b: the divisor (not zero)
    """
    if b == 0:
        raise ZeroDivisionError("cannot divide by zero")
    return _tidy(a / b)


def lookup(table: Table, key: str) -> int | str:
    """Look a fact up in a reference table.

    Tables: 'elements' maps an element name to its atomic number, 'capitals' a
    country to its capital city, 'moons' a planet to its number of moons.

    Args:
        table: which table to read
        key: the element, country or planet, in English (case does not matter)
    """
    rows = TABLES[table]
    value = rows.get(key.strip().lower())
    if value is None:
        raise KeyError(f"no {key!r} in table {table!r}")
    return value


TOOLS = [add, subtract, multiply, divide, lookup]
