"""The agno tests need agno (``forge[agno]``): without it they skip, except in CI, which
installs the extra and must run them."""

from __future__ import annotations

import os

import pytest


def need_agno() -> None:
    """Skip the calling test module when agno is missing; fail it in CI (``CI`` set)."""
    try:
        import agno  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must run the agno tests: install forge[agno]", pytrace=False)
        pytest.skip("agno is not installed (forge[agno])", allow_module_level=True)
