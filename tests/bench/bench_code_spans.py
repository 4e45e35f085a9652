"""Time ``sentences.code_spans`` on backtick-heavy text, against the old quadratic scan.

    python tests/bench/bench_code_spans.py [--old]

Prints seconds per input size; ``--old`` also times the scan it replaced
(tests/test_code_spans.py keeps it as the reference; 80k characters took seconds).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anchored_query.citations.sentences import code_spans
from test_code_spans import reference_spans


def main() -> None:
    old = "--old" in sys.argv
    print(f"{'chars':>8} {'unit':>8} {'new s':>8} {'old s':>8}")
    for unit in ("x`", "``x`"):
        for size in (20_000, 80_000, 320_000):
            text = unit * (size // len(unit))
            t0 = time.perf_counter()
            spans = code_spans(text)
            new_s = time.perf_counter() - t0
            old_s = float("nan")
            if old and size <= 80_000:
                t0 = time.perf_counter()
                assert reference_spans(text) == spans
                old_s = time.perf_counter() - t0
            print(f"{size:>8} {unit!r:>8} {new_s:>8.3f} {old_s:>8.3f}")


if __name__ == "__main__":
    main()
