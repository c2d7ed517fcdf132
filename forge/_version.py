"""The package version, in a module of its own so that a module of forge can read it
without importing the package's public surface (which names every room)."""

from __future__ import annotations

__version__ = "0.1.0"
