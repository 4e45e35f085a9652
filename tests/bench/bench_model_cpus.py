"""Does the embedding model give the same vectors on every CPU? One command, one table.

    python tests/bench/bench_model_cpus.py [--before REV] [--arm64-root DIR]
        [--reference FP32.onnx]

The index is embedded where ``mkdocs build`` runs (a CI runner: x86_64, with or
without AVX-512 VNNI) and questions where the query function runs (Lambda:
arm64). A question must land next to the passages it matches, so the same text
has to give the same vector on both. This embeds the 50 check sentences of
``tools/export_minilm.py`` with :class:`build_index.embedder.Embedder`, as builds
and queries do, on:

- this CPU, natively;
- this CPU under ``valgrind --tool=none`` (x86_64 only): valgrind does not offer
  AVX-512 to the program, so onnxruntime takes its AVX2 kernels, those of a CPU
  without AVX-512 (most CI runners);
- arm64 under qemu-user (``--arm64-root``: a Debian arm64 root file system
  with Python and onnxruntime, tokenizers and numpy in ``/opt/v``; made once, as
  root, with::

      apt-get install qemu-user-static binfmt-support debootstrap
      mount binfmt_misc -t binfmt_misc /proc/sys/fs/binfmt_misc  # if not mounted
      update-binfmts --enable qemu-aarch64
      debootstrap --arch=arm64 --variant=minbase --include=python3,python3-venv \\
          bookworm ROOT http://deb.debian.org/debian
      pip download --only-binary=:all: --python-version 3.11 \\
          --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 \\
          onnxruntime==1.32.0 tokenizers numpy -d ROOT/wheels
      chroot ROOT sh -c 'python3 -m venv /opt/v && /opt/v/bin/pip install \\
          --no-index --find-links /wheels onnxruntime tokenizers numpy'

  the CPU model is qemu's ``neoverse-n1``, Graviton 2's core).

``--before REV`` measures the model shipped at that commit too, side by side.
``--reference`` compares every run with a float32 export of the model
(``tools/export_minilm.py --keep-fp32 PATH`` writes one), run natively.

Cells: the least and the mean cosine between the same sentence's two vectors.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "build_index" / "models" / "all-MiniLM-L6-v2"
FILES = ("model.onnx", "tokenizer.json", "anchored-model.json")


def sentences() -> list[str]:
    """The exporter's check sentences (tools/export_minilm.py)."""
    sys.path.insert(0, str(REPO / "tools"))
    import export_minilm

    return list(export_minilm.SENTENCES)


def worker(model_dir: Path, texts: Path, out: Path) -> None:
    """Embed the texts with the model as builds do; write the vectors to ``out``."""
    from build_index.embedder import Embedder
    from build_index.model_registry import ModelSpec

    embedder = Embedder(ModelSpec.from_dir(model_dir))
    vectors = embedder.embed_passages(json.loads(texts.read_text("utf-8")))
    np.save(out, np.asarray(vectors, dtype=np.float32))


def model_at(rev: str, into: Path) -> Path:
    """The shipped model's three files as of commit ``rev``."""
    into.mkdir(parents=True)
    for name in FILES:
        data = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{rev}:build_index/models/all-MiniLM-L6-v2/{name}"],
            capture_output=True,
            check=True,
        ).stdout
        (into / name).write_bytes(data)
    return into


def reference_model(onnx: Path, into: Path) -> Path:
    """A model folder for a float32 export, beside the shipped tokenizer."""
    from build_index.model_registry import model_sha256

    into.mkdir(parents=True)
    shutil.copyfile(onnx, into / "model.onnx")
    shutil.copyfile(MODEL / "tokenizer.json", into / "tokenizer.json")
    desc = json.loads((MODEL / "anchored-model.json").read_text("utf-8"))
    desc.pop("compute", None)
    desc["sha256"] = model_sha256(into / "model.onnx")
    (into / "anchored-model.json").write_text(json.dumps(desc), "utf-8")
    return into


def native_label() -> str:
    try:
        flags = Path("/proc/cpuinfo").read_text("utf-8")
    except OSError:
        flags = ""
    if "avx512_vnni" in flags:
        return "x86_64 AVX-512 VNNI"
    if "avx2" in flags:
        return "x86_64 AVX2"
    return platform.machine()


def run_here(model: Path, texts: Path, out: Path, *, valgrind: bool = False) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, __file__, "--worker", str(model), str(texts), str(out)]
    if valgrind:
        cmd = ["valgrind", "--tool=none", "-q", *cmd]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)


def run_arm64(root: Path, model: Path, texts: Path, out: Path) -> None:
    """Run the worker inside the arm64 root (chroot; qemu-user through binfmt)."""
    inside = Path("/tmp/anchored-cpus")
    where = root / inside.relative_to("/")
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    shutil.copytree(REPO / "build_index", where / "build_index", ignore=_skip_models)
    shutil.copytree(model, where / "model")
    shutil.copyfile(__file__, where / "bench_model_cpus.py")
    shutil.copyfile(texts, where / "texts.json")
    cpu = root / "sys/devices/system/cpu"  # what onnxruntime's cpuinfo reads
    cpu.mkdir(parents=True, exist_ok=True)
    for name in ("possible", "present"):
        if not (cpu / name).exists():
            (cpu / name).write_text("0-1\n")
    env = dict(os.environ, PYTHONPATH=str(inside), QEMU_CPU="neoverse-n1")
    subprocess.run(
        [
            "chroot",
            str(root),
            "/opt/v/bin/python",
            str(inside / "bench_model_cpus.py"),
            "--worker",
            str(inside / "model"),
            str(inside / "texts.json"),
            str(inside / "out.npy"),
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    shutil.copyfile(where / "out.npy", out)
    shutil.rmtree(where)


def _skip_models(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n in ("models", "__pycache__")]


def cosines(a: np.ndarray, b: np.ndarray) -> str:
    c = (a * b).sum(axis=1)
    return f"{c.min():.5f} / {c.mean():.5f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", metavar="REV", help="also the model shipped at this commit")
    ap.add_argument("--arm64-root", type=Path, help="an arm64 root file system (see above)")
    ap.add_argument("--reference", type=Path, help="a float32 ONNX export of the model")
    ap.add_argument("--worker", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return

    work = Path(tempfile.mkdtemp(prefix="anchored-cpus-"))
    texts = work / "texts.json"
    texts.write_text(json.dumps(sentences()), "utf-8")
    models = {"now": MODEL}
    if args.before:
        models[f"at {args.before}"] = model_at(args.before, work / "before")
    cpus = [native_label()]
    if platform.machine() == "x86_64" and "AVX2" not in cpus[0] and shutil.which("valgrind"):
        cpus.append("x86_64 AVX2 (valgrind)")
    if args.arm64_root:
        cpus.append("arm64 Neoverse-N1 (qemu)")
    reference = None
    if args.reference:
        run_here(reference_model(args.reference, work / "fp32"), texts, work / "fp32.npy")
        reference = np.load(work / "fp32.npy")

    pairs = [(a, b) for i, a in enumerate(cpus) for b in cpus[i + 1 :]]
    rows = []
    for label, model in models.items():
        got: dict[str, np.ndarray] = {}
        for i, cpu in enumerate(cpus):
            out = work / f"{label.replace(' ', '_')}-{i}.npy"
            print(f"{label}: {cpu} …", file=sys.stderr, flush=True)
            if "valgrind" in cpu:
                run_here(model, texts, out, valgrind=True)
            elif "qemu" in cpu:
                run_arm64(args.arm64_root, model, texts, out)
            else:
                run_here(model, texts, out)
            got[cpu] = np.load(out)
        cells = [cosines(got[a], got[b]) for a, b in pairs]
        if reference is not None:
            cells += [cosines(got[c], reference) for c in cpus]
        rows.append((label, cells))
    head = [f"{a} vs {b}" for a, b in pairs]
    if reference is not None:
        head += [f"{c} vs float32" for c in cpus]
    print(f"\n{len(sentences())} sentences; cosine between the two vectors, least / mean\n")
    print("| model | " + " | ".join(head) + " |")
    print("|---|" + "---|" * len(head))
    for label, cells in rows:
        print(f"| {label} | " + " | ".join(cells) + " |")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
