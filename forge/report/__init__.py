"""Rendering results for people: console tables (rich) here; HTML reports later."""

from __future__ import annotations

from forge.report.console import diff_table, registry_table, summary_table, task_table

__all__ = ["diff_table", "registry_table", "summary_table", "task_table"]
