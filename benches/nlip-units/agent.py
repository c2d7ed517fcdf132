"""The nlip-units agent: a real NLIP server (nlip-server's FastAPI app, uvicorn) around the
scripted brain.

    python agent.py --port 8010

forge starts it itself for `forge eval` and `forge search` (the bench's ``serve``), on
a free port of 127.0.0.1, and stops it at the end. Run by hand, it serves until
Ctrl-C at ``http://127.0.0.1:8010/nlip/``.

Each NLIP message is one question: the agent reads its text and the config (the
structured JSON submessage labelled ``forge``), and answers with the converted value
as text and a structured ``forge`` submessage with its tool calls, tokens and cost. A
question it cannot answer gets a reply of format ``error``.
"""

from __future__ import annotations

import argparse

import uvicorn
from brain import respond
from nlip_sdk.nlip import NLIP_Factory, NLIP_Message
from nlip_server.server import NLIP_Session, SafeApplication, setup_server


class Converter(NLIP_Session):
    async def execute(self, msg: NLIP_Message) -> NLIP_Message:
        forge = next((s.content for s in msg.submessages or []
                      if (s.label or "").lower() == "forge" and isinstance(s.content, dict)),
                     {})
        try:
            reply = respond(msg.extract_text(language=None) or "", forge.get("config", {}),
                            int(forge.get("seed", 0)))
        except ValueError as exc:
            return NLIP_Factory.create_error_code(str(exc))
        answer = NLIP_Factory.create_text(reply["answer"])
        answer.add_json(reply["report"], label="forge")
        return answer


class UnitsApp(SafeApplication):
    def create_session(self) -> NLIP_Session:
        return Converter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8010)
    port = parser.parse_args().port
    uvicorn.run(setup_server(UnitsApp()), host="127.0.0.1", port=port, log_level="warning",
                timeout_graceful_shutdown=2)


if __name__ == "__main__":
    main()
