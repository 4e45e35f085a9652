"""Run every benchmark one after another and print their tables.

    python tests/bench/run_all.py [--only NAME ...] [--beir DIR]

The heavy ones (``scale``: a 100k-chunk site built cold, about 2 h on 2 cores;
``llm-answers``: a 1 GB local language model) run only when named with --only.

Benchmarks are not part of the test run: they take minutes (embedding a
5,000-document corpus, 60 s load runs) and measure a noisy machine. Each one
compares against a reference measured in the same run (bm25s, raw
onnxruntime, numpy brute force), so read the ratios. Generated sites and
indexes are kept in /tmp/anchored-bench and reused by later runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
WORK = "/tmp/anchored-bench"

# name -> (script, extra arguments); order: cheap first, shared builds reused later.
BENCHMARKS: dict[str, tuple[str, list[str]]] = {
    "bm25": ("bench_bm25.py", []),
    "embed": ("bench_embed.py", ["--texts", "512"]),
    "retrieval": ("bench_retrieval.py", ["--work", f"{WORK}/scifact"]),
    "calibrate": ("calibrate_abstention.py", ["--work", f"{WORK}/extractive", "--curve"]),
    "extractive": ("bench_extractive.py", ["--work", f"{WORK}/extractive"]),
    "rerank": ("bench_rerank.py", ["--work", f"{WORK}/extractive", "--split", "test"]),
    "latency": ("bench_latency.py", ["--source", f"{WORK}/scifact/.anchored/index"]),
    "build": ("bench_build.py", []),
    "cold-start": ("bench_cold_start.py", []),
    "fuzz": ("fuzz.py", []),
    "verifier": ("bench_verifier.py", []),  # recorded, labelled replies (issue 27)
    "stream-verify": ("bench_stream_verify.py", []),
    "llmstxt": ("bench_llmstxt.py", []),  # needs pip install mkdocs-llmstxt
    "load": ("load.py", []),
    # heavy: run only when named (--only build scale prints the whole CI-scale table)
    "scale": ("bench_scale.py", ["--raw-sample", "500"]),
    "llm-answers": ("bench_llm_answers.py", []),
}
HEAVY = {"scale", "llm-answers"}  # a 100k-chunk build (about 2 h); a 1 GB local model


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), help="run only these")
    args = p.parse_args()
    failed = []
    for name, (script, extra) in BENCHMARKS.items():
        if (args.only and name not in args.only) or (not args.only and name in HEAVY):
            continue
        path = HERE / script
        if not path.exists():
            print(f"\n## {name}: {script} is missing, skipped")
            continue
        print(f"\n## {name} ({script})", flush=True)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, str(path), *extra])
        print(f"({name}: {time.perf_counter() - t0:.0f} s, exit {done.returncode})", flush=True)
        if done.returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
