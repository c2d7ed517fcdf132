"""A harness whose model endpoint is down: every attempt raises."""

from __future__ import annotations

from typing import Any


def run(config: dict[str, Any], task: Any, ctx: Any) -> dict[str, Any]:
    raise ConnectionError(f"model endpoint http://127.0.0.1:9/v1 refused the connection "
                          f"(task {task.id}, seed {ctx.seed})")
