"""An I/O-bound stand-in for a model endpoint: each attempt sleeps 20 ms."""

from __future__ import annotations

import time
from typing import Any


def run(config: dict[str, Any], task: Any, ctx: Any) -> dict[str, Any]:
    time.sleep(0.02)
    return {"output": task.expected}
