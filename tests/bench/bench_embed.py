"""Throughput of ``Embedder.embed_passages`` against plain onnxruntime, in one run.

    python tests/bench/bench_embed.py [--texts N] [--rounds R] [--threads T]

Texts are chunk-like passages of varied length cut from SciFact abstracts
(``../shared/data/scifact/corpus.jsonl.gz`` beside the repository): 1 to 8
consecutive sentences, so lengths range from a dozen tokens to past the 256-token
limit. Both contenders include tokenisation, inference, mean pooling and L2
normalisation:

* raw: the same model and tokenizer, batches of 32 in input order, every text
  padded (and truncated) to 256 tokens, onnxruntime with default session options
  except the same intra-op thread count;
* raw_tuned: the same, with the Embedder's session options (no spin-waiting),
  to separate the gain of length bucketing from that of the options;
* ours: ``Embedder(spec).embed_passages(texts)`` (length-sorted batches).

Rounds alternate raw/ours so a noisy neighbour on a shared machine hurts both
alike; the best round of each is reported. Also checks that both agree on the
vectors and that a second pass through ``EmbeddingCache`` embeds nothing.
Target: ours >= 90% of raw passages/s.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from build_index.cache import EmbeddingCache
from build_index.embedder import Embedder, ModelSpec, get_model

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl.gz"
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


def chunk_texts(corpus: Path, n: int, seed: int = 13) -> list[str]:
    """``n`` passages of 1-8 consecutive sentences from the corpus abstracts."""
    rng = random.Random(seed)
    out: list[str] = []
    with gzip.open(corpus, "rt", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            sents = [s for s in _SENT.split(doc.get("text", "")) if s.strip()]
            i = 0
            while i < len(sents):
                k = rng.choice([1, 1, 2, 2, 3, 4, 6, 8])
                out.append(" ".join(sents[i : i + k]))
                i += k
            if len(out) >= n * 3:
                break
    rng.shuffle(out)
    if len(out) < n:
        sys.exit(f"only {len(out)} passages in {corpus}")
    return out[:n]


class Raw:
    """Plain onnxruntime: fixed batches of 32, every text padded to 256 tokens."""

    def __init__(
        self,
        spec: ModelSpec,
        opts: ort.SessionOptions,
        pad_id: int,
        batch: int = 32,
        pad_to: int = 256,
    ):
        self.session = ort.InferenceSession(
            str(spec.path), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self.tok = Tokenizer.from_file(str(spec.tokenizer_path))
        self.tok.enable_truncation(max_length=pad_to)
        self.tok.enable_padding(length=pad_to, pad_id=pad_id)
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.prefix = spec.passage_prefix
        self.batch = batch

    def embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for i in range(0, len(texts), self.batch):
            enc = self.tok.encode_batch([self.prefix + t for t in texts[i : i + self.batch]])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            feeds = {k: v for k, v in feeds.items() if k in self.inputs}
            hidden = self.session.run(None, feeds)[0]
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out).astype(np.float32)


def main() -> None:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None, help="default: available cores")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = ap.parse_args()

    spec = get_model(args.model)
    texts = chunk_texts(args.corpus, args.texts)
    ours = Embedder(spec, threads=args.threads)
    threads = ours._session.get_session_options().intra_op_num_threads
    plain = ort.SessionOptions()  # onnxruntime's defaults, same thread count
    plain.intra_op_num_threads = threads
    for key, value in spec.session_entries().items():  # as the model is meant to run
        plain.add_session_config_entry(key, value)
    raw = Raw(spec, plain, pad_id=ours._pad_id)
    raw_tuned = Raw(spec, ours._session.get_session_options(), pad_id=ours._pad_id)

    tok = Tokenizer.from_file(str(spec.tokenizer_path))
    tok.no_padding()
    tok.enable_truncation(max_length=spec.max_tokens)
    lengths = np.array([len(e.ids) for e in tok.encode_batch(texts)])
    print(
        f"{len(texts)} passages from {args.corpus.name}: tokens min {lengths.min()} "
        f"median {int(np.median(lengths))} mean {lengths.mean():.0f} max {lengths.max()} "
        f"({(lengths >= spec.max_tokens).mean():.0%} truncated); "
        f"model {spec.name}; intra-op threads {threads}"
    )
    ours.embed_passages(texts[:8])  # warm up both sessions
    raw.embed(texts[:8])
    raw_tuned.embed(texts[:8])

    times: dict[str, list[float]] = {"raw": [], "raw_tuned": [], "ours": []}
    vecs: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        contenders = (
            ("raw", raw.embed),
            ("raw_tuned", raw_tuned.embed),
            ("ours", ours.embed_passages),
        )
        for name, fn in contenders:
            t0 = time.perf_counter()
            vecs[name] = fn(texts)
            times[name].append(time.perf_counter() - t0)
            print(f"  round {r + 1} {name:<9} {times[name][-1]:7.2f} s", flush=True)

    best = {k: min(v) for k, v in times.items()}
    rate = {k: len(texts) / v for k, v in best.items()}
    print()
    w = 56
    print(f"| {'method':<{w}} | {'seconds':>7} | {'passages/s':>10} | {'vs raw':>6} |")
    print(f"|{'-' * (w + 2)}|{'-' * 9}|{'-' * 12}|{'-' * 8}|")
    labels = {
        "raw": "raw onnxruntime, batch 32, pad to 256 (default options)",
        "raw_tuned": "raw, batch 32, pad to 256, Embedder's session options",
        "ours": "Embedder.embed_passages (length-bucketed)",
    }
    for k in ("raw", "raw_tuned", "ours"):
        share = rate[k] / rate["raw"]
        print(f"| {labels[k]:<{w}} | {best[k]:7.2f} | {rate[k]:10.1f} | {share:6.0%} |")
    agree = np.sum(vecs["raw"] * vecs["ours"], axis=1)
    print(f"\ncosine(raw, ours) per passage: min {agree.min():.4f} mean {agree.mean():.4f}")

    with tempfile.TemporaryDirectory() as tmp:
        for build in (1, 2):
            cache = EmbeddingCache(Path(tmp), spec.vectors_id)
            found = cache.lookup(texts)
            todo = [t for t, v in zip(texts, found, strict=True) if v is None]
            t0 = time.perf_counter()
            if todo:
                cache.store(todo, ours.embed_passages(todo))
            cache.flush()
            print(
                f"cache build {build}: embedded {len(todo)} of {len(texts)} "
                f"(hits {cache.hits}, misses {cache.misses}) in {time.perf_counter() - t0:.2f} s"
            )
    ratio = rate["ours"] / rate["raw"]
    print(f"\nratio ours/raw = {ratio:.2f} (target >= 0.90): {'OK' if ratio >= 0.9 else 'BELOW'}")
    print(f"ratio ours/raw_tuned = {rate['ours'] / rate['raw_tuned']:.2f}")


if __name__ == "__main__":
    main()
