"""What the ``acp`` harness and its private pieces share: the permission policies and
the two ways an attempt fails on the ACP boundary.

Apart from :mod:`forge.harness.acp` so that the session and the turn, which the harness
imports once the SDK is there, can read them without importing the harness back.
"""

from __future__ import annotations

from typing import Literal

from forge.harness.base import AttemptTimeout

__all__ = ["POLICIES", "POLICY_NAMES", "AcpError", "AcpTimeout", "Policy"]

#: A permission policy -> the option kinds it picks, the first one the agent offers:
#: ``allow_once`` takes an ``allow_always`` option when no ``allow_once`` is offered, and
#: so on; when none is offered (and for ``cancel``) the answer is the ``cancelled``
#: outcome, as a person closing the dialog would give. ``allow`` and ``deny`` mean
#: ``allow_once`` and ``reject_once``.
POLICIES: dict[str, tuple[str, ...]] = {
    "allow_once": ("allow_once", "allow_always"),
    "allow_always": ("allow_always", "allow_once"),
    "reject_once": ("reject_once", "reject_always"),
    "reject_always": ("reject_always", "reject_once"),
    "cancel": (),
    "allow": ("allow_once", "allow_always"),
    "deny": ("reject_once", "reject_always"),
}
POLICY_NAMES = tuple(POLICIES)
Policy = Literal["allow_once", "allow_always", "reject_once", "reject_always", "cancel",
                 "allow", "deny"]


class AcpError(RuntimeError):
    """The attempt failed on the ACP boundary; the message says how, with the agent's stderr."""


class AcpTimeout(AttemptTimeout):
    """The agent gave no answer before the attempt's deadline; its prompt was cancelled."""
