"""A fake OpenAI-compatible LLM for the end-to-end browser tests (``e2e.test.js``).

Starts :class:`fakes.FakeOpenAIServer` on a free port of 127.0.0.1, prints
``READY <base_url>`` (the value for ``ANCHORED_LLM_BASE_URL``) and serves until
it is terminated (SIGTERM / SIGINT) or, with ``--stdin``, until its stdin closes.

It answers like a well-behaved model, from the prompt it is sent:

- the query-rewrite call (no ``<passages>`` in the prompt): the standalone
  question (the earlier question of the conversation, if any, and this one);
- a question mentioning "markup": one sentence quoting the notes passage's
  markup as inline code, ``<img src=x onerror=alert(1)>``, citing that passage
  (the passage holds it, so it passes verification and reaches the reader; the
  widget must show it as text inside a ``<code>`` element);
- anything else: the first sentence of each of the first two passages, cited
  (``fakes.quote_passages(k=2)``); with ``--paragraphs K``, of the first K
  passages, one paragraph each (a streamed answer sends them one by one).

Streamed requests (``"stream": true``) get the reply at ``--first-token-s`` /
``--tokens-per-s`` (a word a token; default: all at once), as ``streaming.test.js``
uses it to watch sentences arrive. A streamed reply to a question containing
"fails midway" stops after its first paragraph and drops the connection (the
model failing after sentences were sent).

    python tests/browser/fake_llm.py            # READY http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import (
    Behaviour,
    FakeOpenAIServer,
    Partial,
    RecordedRequest,
    Reply,
    StreamRate,
    quote_passages,
    stream_pieces,
)

XSS_REPLY = "Our team writes `<img src=x onerror=alert(1)>` in examples to test escaping [{n}]."
_QUESTION = re.compile(r"<question>\s*(.*?)\s*</question>", re.S)
_CONVERSATION = re.compile(r"<conversation>\s*(.*?)\s*</conversation>", re.S)
_MARK = re.compile(r"(?m)^\[(\d+)\][^\n]*\n")
_quote = quote_passages(k=2)


def _question(text: str) -> str:
    found = _QUESTION.search(text)
    return found.group(1).strip() if found else ""


def _rewrite(request: RecordedRequest) -> str:
    question = _question(request.user)
    conversation = _CONVERSATION.search(request.user)
    earlier = ""
    if conversation:
        users = [
            line[5:].strip()
            for line in conversation.group(1).splitlines()
            if line.startswith("user:")
        ]
        earlier = users[-1] if users else ""
    return f"{earlier} {question}".strip()


def _passage_with(text: str, needle: str) -> int | None:
    marks = list(_MARK.finditer(text))
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        if needle in text[mark.end() : end]:
            return int(mark.group(1))
    return None


def answer(request: RecordedRequest, paragraphs: int = 0) -> str:
    """The reply to one chat-completions request (see the module docstring)."""
    user = request.user
    if "<passages>" not in user:
        return _rewrite(request)
    if "markup" in _question(user).lower():
        n = _passage_with(user, "Our team writes")
        if n is not None:
            return XSS_REPLY.format(n=n)
    if paragraphs:
        quoted = quote_passages(k=paragraphs)(request)
        return re.sub(r"(\[\d+\]\.) (?=\S)", "\\1\n\n", quoted)
    return _quote(request)


class BrowserFakeLLM(FakeOpenAIServer):
    """The fake OpenAI server, failing midway through streamed replies when asked to."""

    def respond(self, handler: Any, request: RecordedRequest, behaviour: Behaviour) -> None:
        """As the base does; "fails midway" questions get a Partial reply when streamed."""
        failing = "fails midway" in _question(request.user).lower()
        if failing and isinstance(behaviour, Reply) and "<passages>" in request.user:
            text = behaviour.render(request)
            first = text.split("\n\n", 1)[0] + "\n\n"
            behaviour = Partial(text, tokens=len(stream_pieces(first)) + 1)
        super().respond(handler, request, behaviour)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stdin", action="store_true", help="stop when stdin closes")
    p.add_argument("--paragraphs", type=int, default=0, help="quote K passages, a paragraph each")
    p.add_argument(
        "--first-token-s", type=float, default=0.0, help="streamed: wait before the first token"
    )
    p.add_argument(
        "--tokens-per-s", type=float, default=0.0, help="streamed: tokens a second (0: all at once)"
    )
    args = p.parse_args()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    rate = StreamRate(first_token_s=args.first_token_s, tokens_per_s=args.tokens_per_s)
    reply = Reply(lambda request: answer(request, args.paragraphs))
    with BrowserFakeLLM(default=reply, rate=rate) as srv:
        print(f"READY {srv.url}", flush=True)
        if args.stdin:

            def watch_stdin() -> None:
                sys.stdin.read()
                stop.set()

            threading.Thread(target=watch_stdin, daemon=True).start()
        while not stop.wait(0.5):
            pass
        print(f"fake_llm: {len(srv.requests)} requests answered", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
