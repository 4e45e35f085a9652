"""A reply that only pastes its passages is judged as the quote (citations/pasted.py):
shown as the closest the docs come when the quoted answer would refuse the question."""

from __future__ import annotations

from pathlib import Path

from anchored_query.citations.pasted import MIN_SENTENCES, is_pasted, pasted_share
from fakes import FakeOpenAIServer, Reply, quote_passages
from passages import make_passage
from test_ask_llm import openai_client
from test_streaming import comparable, streamed

PAGE = (
    "Live reload needs WebSocket connections to the browser. Some corporate proxies "
    "block them, so run Skylark with the no-livereload flag and refresh by hand. "
    "The preview window has keyboard shortcuts for every page of the site."
)
PASTED = [
    "Live reload needs **WebSocket** connections to the browser [1].",
    "Some corporate proxies block them, so run Skylark with the no-livereload flag [1].",
    "The preview window has keyboard shortcuts for every page [1].",
]


def test_sentences_copied_from_a_passage_count_markup_and_markers_aside() -> None:
    passages = [make_passage(PAGE)]
    assert pasted_share(PASTED, passages) == (3, 3)
    assert is_pasted(PASTED, passages)
    # One sentence of the model's own in three is not a paste.
    own = [*PASTED[:2], "Turn the proxy off for localhost so the reload keeps working [1]."]
    assert pasted_share(own, passages) == (2, 3)
    assert not is_pasted(own, passages)


def test_short_sentences_and_code_are_not_counted() -> None:
    passages = [make_passage(PAGE)]
    short = ["Yes [1].", "toggle:", "```yaml\nlive reload: false\n```"]
    assert pasted_share(short, passages) == (0, 0)
    assert not is_pasted(short, passages)  # nothing counted: not a paste
    # One copied sentence beside them is the whole of what the reply says.
    assert pasted_share([*short, PASTED[0]], passages) == (1, 1)
    assert is_pasted([*short, PASTED[0]], passages) and MIN_SENTENCES == 1


QUESTION_NOT_COVERED = "How do I deploy Skylark on Kubernetes with a Helm chart and autoscaling?"


def test_a_pasted_reply_to_a_question_the_docs_do_not_cover_is_not_an_answer(
    qa_index: Path, tmp_path: Path, openai: FakeOpenAIServer
) -> None:
    openai.script(*[Reply(quote_passages(k=6))] * 2)
    with openai_client(qa_index, tmp_path, openai) as c:
        body = c.post("/v1/ask", json={"question": QUESTION_NOT_COVERED}).json()
        quoted = c.post("/v1/ask", json={"question": QUESTION_NOT_COVERED, "mode": "extractive"})
        # The stream shows the copied sentences as they are checked; its final record
        # (which the ask box draws in place of them) is the buffered abstention.
        events = streamed(c, {"question": QUESTION_NOT_COVERED})
    assert quoted.json()["abstained"]  # the quoted answer refuses it
    assert body["mode"] == "llm" and body["verification"]["pasted"]
    assert body["abstained"] and body["coverage"] == "none"
    # What the model pasted stays, as the closest the docs come, with its citations.
    assert body["answer"] and all(item["citations"] for item in body["answer"])
    assert comparable(dict(events)["final"]) == comparable(body)


def test_a_pasted_reply_to_a_question_the_docs_answer_stays_an_answer(
    qa_index: Path, tmp_path: Path, openai: FakeOpenAIServer
) -> None:
    question = "Why does live reload not work behind our corporate proxy?"
    openai.script(Reply(quote_passages(k=6)))
    with openai_client(qa_index, tmp_path, openai) as c:
        body = c.post("/v1/ask", json={"question": question}).json()
    assert body["verification"]["pasted"]
    assert not body["abstained"] and body["coverage"] == "full"


def test_a_reply_of_its_own_is_not_judged_as_a_quote(
    qa_index: Path, tmp_path: Path, openai: FakeOpenAIServer
) -> None:
    own = "When port 8000 is taken, start Skylark on another one with `--dev-addr` [1]."
    openai.script(Reply(own))
    with openai_client(qa_index, tmp_path, openai) as c:
        body = c.post("/v1/ask", json={"question": "Which port does Skylark use?"}).json()
    assert body["mode"] == "llm" and body["verification"]["pasted"] is False
