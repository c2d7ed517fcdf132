"""Canonical JSON and the sha256 digests built on it (fingerprints, integrity)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["canonical_json", "digest_of", "file_digest", "sha256_hex"]


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, no NaN, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False, default=_fallback)


def _fallback(value: Any) -> Any:
    # Tuples and sets reach us from user data; give them a stable JSON form.
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))


def file_digest(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()
