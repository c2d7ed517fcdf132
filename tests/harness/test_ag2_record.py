"""The AG2 recorder's tool calls come in the order the model asked for them
(``forge.harness._ag2_record``), fed real ``ag2.events`` as AG2 publishes them.

The calls of one model turn run concurrently: which one's ``ToolCallEvent`` comes first
varies from run to run, and the record of the same attempt must not.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

ev = pytest.importorskip("ag2.events")

from forge.harness._ag2_record import Recorder  # noqa: E402


def feed(recorder: Recorder, events: list[Any]) -> None:
    async def run() -> None:
        for event in events:
            await recorder.on_event(event)

    asyncio.run(run())


def asked(*cities: str) -> tuple[Any, list[Any]]:
    """A model turn asking ``lookup`` for each city, and the calls it asked for."""
    calls = [ev.ToolCallEvent("lookup", arguments=f'{{"city": "{c}"}}') for c in cities]
    return ev.ModelResponse(tool_calls=ev.ToolCallsEvent(calls=calls), model="m",
                            finish_reason="tool_calls"), calls


@pytest.mark.parametrize("started", list(itertools.permutations(range(3))))
def test_the_calls_of_a_turn_are_recorded_in_the_order_asked_whichever_ran_first(
        started: tuple[int, ...]) -> None:
    turn, calls = asked("Lima", "Oslo", "Pune")
    later, [again] = asked("Quito")
    recorder = Recorder()
    # The executor's copies (same id) start in the order given, finish in reverse.
    runs = [calls[i].handled_by("function:lookup") for i in started]
    feed(recorder, [turn, *runs,
                    *(ev.ToolResultEvent.from_call(r, "sunny") for r in reversed(runs)),
                    later, again, ev.ToolResultEvent.from_call(again, "cold")])
    assert [c.args["city"] for c in recorder.tool_calls] == ["Lima", "Oslo", "Pune", "Quito"]
    assert [c.result for c in recorder.tool_calls] == ["sunny"] * 3 + ["cold"]


def test_a_call_with_no_result_is_not_recorded_and_one_no_turn_named_keeps_its_place(
        ) -> None:
    turn, [lima, oslo] = asked("Lima", "Oslo")
    stray = ev.ToolCallEvent("lookup", arguments='{"city": "Nowhere"}')
    recorder = Recorder()
    feed(recorder, [turn, oslo, stray, lima, ev.ToolResultEvent.from_call(stray, "?"),
                    ev.ToolResultEvent.from_call(lima, "sunny")])
    # Oslo was cut off (no result); the stray call comes after the turn's named ones.
    assert [c.args["city"] for c in recorder.tool_calls] == ["Lima", "Nowhere"]
