"""The acp harness's tests need agent-client-protocol: CI installs it (``run.py test``
installs ``forge[acp]``), so there its absence fails; elsewhere the tests are skipped."""

from __future__ import annotations

import importlib.util
import os

import pytest


def require_sdk() -> None:
    """Skip the calling test module when the SDK is missing, unless CI is set: then fail."""
    if importlib.util.find_spec("acp") is not None:
        return
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail("CI is set but agent-client-protocol is not installed; run.py test "
                    "installs forge[acp]", pytrace=False)
    pytest.skip("agent-client-protocol is not installed (pip install 'forge[acp]'); CI runs "
                "these tests", allow_module_level=True)
