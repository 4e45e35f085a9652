"""Running a reader model made by ``tools/train_reader.py`` (issue 26), for the benchmarks.

A reader reads the question together with each passage and says how likely the passage
*answers* the question, is *on topic* without answering it, or is *unrelated*. It runs
with onnxruntime and tokenizers, as the embedder does. Not part of the query function:
measured on held-out sites, the models trained so far rank worse than the embedder's own
similarity (``bench_reader.py``), so none is packaged; this module is how they are
measured.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from anchored_query.question.query_forms import search_forms
from anchored_query.types import Turn

from build_index.embedder import Embedder, ModelSpec
from build_index.model_registry import FLOAT32_COMPUTE

DESCRIPTOR = "anchored-reader.json"
LABELS = ("answers", "on_topic", "unrelated")
#: Tokens read per (question, passage) when the descriptor does not say (the longer of
#: the two is cut first): the question, the heading path and the passage's first ~100 words.
MAX_TOKENS = 160
_BATCH = 16


class ReaderError(Exception):
    """The reader's folder is not a model this code can run."""


@dataclass(frozen=True)
class Reading:
    """P(answers), P(on_topic), P(unrelated) for each passage, in the order given."""

    probs: npt.NDArray[np.float32]

    @property
    def answers(self) -> npt.NDArray[np.float32]:
        return self.probs[:, 0]

    @property
    def relevance(self) -> npt.NDArray[np.float32]:
        """The ranking score: answers first, then on-topic passages above unrelated ones."""
        return self.probs[:, 0] + 0.1 * self.probs[:, 1]


class Reader:
    """Runs the reader model of one folder (``model.onnx``, ``tokenizer.json``, descriptor)."""

    def __init__(self, folder: Path, *, verify: bool = True, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        try:
            desc = json.loads((folder / DESCRIPTOR).read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ReaderError(f"{folder} is not a reader model folder: {exc}") from exc
        if desc.get("format") != "anchored-reader" or desc.get("labels") != list(LABELS):
            raise ReaderError(f"{folder / DESCRIPTOR}: not an anchored-reader descriptor")
        self.name = str(desc.get("name", folder.name))
        self._bi: tuple[Embedder, float, float] | None = None
        if desc.get("kind") == "bi-encoder":  # tools/train_bireader.py: the embedder, moved
            spec = ModelSpec.from_dir(folder / str(desc.get("model", "model")))
            if verify and spec.sha256 != str(desc.get("sha256", "")).lower():
                raise ReaderError(f"{folder}: the model's sha256 does not match the descriptor")
            embedder = Embedder(spec, threads=threads, verify=verify)
            self._bi = (embedder, float(desc["scale"]), float(desc["bias"]))
            return
        onnx = folder / str(desc.get("onnx", "model.onnx"))
        if verify:
            digest = hashlib.sha256(onnx.read_bytes()).hexdigest()
            if digest != str(desc.get("sha256", "")).lower():
                raise ReaderError(f"{onnx}: sha256 {digest} does not match the descriptor")
        tok = Tokenizer.from_file(str(folder / str(desc.get("tokenizer", "tokenizer.json"))))
        tok.no_padding()
        self.max_tokens = int(desc.get("max_tokens", MAX_TOKENS))
        tok.enable_truncation(max_length=self.max_tokens, strategy="longest_first")
        tok.enable_padding(pad_id=tok.token_to_id("[PAD]") or 0, pad_token="[PAD]")
        self._tok = tok
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or max(1, len(os.sched_getaffinity(0)))
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        opts.enable_mem_pattern = False
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # tools/export_minilm.quantize: int8 weights folded into float32 at load
        for key, value in FLOAT32_COMPUTE.items():
            opts.add_session_config_entry(key, value)
        self._session = ort.InferenceSession(
            str(onnx), sess_options=opts, providers=["CPUExecutionProvider"]
        )

    def read(self, question: str, passages: Sequence[str]) -> Reading:
        """How likely each passage answers ``question``."""
        if not passages:
            return Reading(np.zeros((0, len(LABELS)), dtype=np.float32))
        if self._bi is not None:
            embedder, scale, bias = self._bi
            cos = embedder.embed_passages(list(passages)) @ embedder.embed_query(question)
            p = (1.0 / (1.0 + np.exp(-(scale * cos + bias)))).astype(np.float32)
            return Reading(np.c_[p, np.zeros_like(p), 1 - p])
        out: list[npt.NDArray[np.float32]] = []
        for start in range(0, len(passages), _BATCH):
            enc = self._tok.encode_batch([(question, p) for p in passages[start : start + _BATCH]])
            feed = {
                "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
            }
            logits = self._session.run(["logits"], feed)[0].astype(np.float32)
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            out.append(e / e.sum(axis=1, keepdims=True))
        return Reading(np.concatenate(out))


def reader_question(question: str, history: Sequence[Turn] = ()) -> str:
    """What the reader reads as the question: a follow-up with the question before it
    (the last of retrieval's own search forms)."""
    return search_forms(question, history)[-1]


#: Characters of a passage the reader reads (at most ~140 tokens, so the tokenizer's cut
#: rarely bites): what the training pairs were labelled on, cut the same way.
PASSAGE_CHARS = 700


def passage_of(heading_path: Sequence[str], text: str) -> str:
    """A passage as the reader was trained to read it: its heading path, then the start
    of its text (cut at a space before :data:`PASSAGE_CHARS`)."""
    if len(text) > PASSAGE_CHARS:
        cut = text.rfind(" ", 0, PASSAGE_CHARS)
        text = text[: cut if cut > PASSAGE_CHARS // 2 else PASSAGE_CHARS] + " …"
    return f"{' > '.join(str(h) for h in heading_path)}\n{text}".strip()
