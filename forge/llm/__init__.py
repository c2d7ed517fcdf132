"""Calling OpenAI-compatible model endpoints (the ``openai`` harness, the ``judge``
scorer and the ``llm`` proposer share this client)."""

from __future__ import annotations

from forge.llm.client import ChatClient, ChatReply, Endpoint, LLMError, ToolCallRequest

__all__ = ["ChatClient", "ChatReply", "Endpoint", "LLMError", "ToolCallRequest"]
