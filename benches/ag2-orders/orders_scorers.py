"""The bench's scorer: AG2's own prebuilt check, used by forge as it is.

``final_answer_matches`` passes when the agent's final answer equals (ignoring case)
the suite task's ``reference_outputs["answer"]``. forge reads its feedback as the
attempt's score (``scorer: {ag2: "orders_scorers:ANSWER"}``), and ``forge export ag2`` writes
the same feedback into the AG2 run, so ``RunDiff`` compares it with a run of AG2's own
runner scored by this scorer.
"""

from __future__ import annotations

from ag2.eval.scorers import final_answer_matches

ANSWER = final_answer_matches("answer", matcher="casefold")
