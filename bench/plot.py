"""The README's benchmark plot: read latency against store size, from docs/benchmarks.md.

Draws the p50 of a top-10 read at each store size the retrieval benchmark measured (the
``### N records`` sections of docs/benchmarks.md, written by ``bench.retrieval --write``):
``retrieve`` and ``retrieve_graph`` beside the exact baselines measured in the same runs
(FAISS ``IndexFlatIP``, one thread, and numpy's ``M @ q``). Needs the ``bench`` extra
(matplotlib)::

    .venv/bin/python -m bench.plot                    # writes docs/benchmarks.png
    .venv/bin/python -m bench.plot --out /tmp/plot.png
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
SERIES = {
    "membrane_es retrieve (top 10)": "`retrieve` top-10, unscoped trust",
    "membrane_es retrieve_graph (10 roots)": "`retrieve_graph` 10 roots, unscoped trust",
    "FAISS IndexFlatIP, 1 thread": "FAISS `IndexFlatIP`, 1 thread, all scopes",
    "numpy M @ q + argpartition": "numpy floor `M @ q` + argpartition, all scopes",
}
_SECTION = re.compile(r"^### ([\d,]+) records\s*$")
_P50 = re.compile(r"p50 ([\d.]+) ms")


def read_latencies(markdown: str) -> dict[str, dict[int, float]]:
    """Series name → {store size: p50 ms}, from the benchmark notes' retrieval tables."""
    series: dict[str, dict[int, float]] = {name: {} for name in SERIES}
    size: int | None = None
    for line in markdown.splitlines():
        section = _SECTION.match(line)
        if section:
            size = int(section.group(1).replace(",", ""))
            continue
        if size is None or not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for name, label in SERIES.items():
            found = _P50.search(cells[1]) if len(cells) > 1 else None
            if cells[0].startswith(label) and found:
                series[name][size] = float(found.group(1))
    return {name: points for name, points in series.items() if points}


def plot(latencies: dict[str, dict[int, float]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.2), dpi=120)
    for name, points in latencies.items():
        sizes = sorted(points)
        axes.plot(sizes, [points[s] for s in sizes], marker="o", label=name)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("records in the store")
    axes.set_ylabel("p50 latency of one read (ms)")
    axes.set_title("Top-10 reads, unscoped trust (bench.retrieval, one run per size)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out, metadata={"Software": None})  # no version stamp: same input, same file
    pyplot.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=Path, default=DOCS / "benchmarks.md")
    parser.add_argument("--out", type=Path, default=DOCS / "benchmarks.png")
    args = parser.parse_args()
    latencies = read_latencies(args.notes.read_text())
    if not latencies:
        raise SystemExit(f"no retrieval figures in {args.notes}: run bench.retrieval --write")
    plot(latencies, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
