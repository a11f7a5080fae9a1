"""all-MiniLM-L6-v2 three ways, side by side: the default (int8 weights on ONNX Runtime, the
base install), and the fp32 weights of the ``embeddings`` extra on ONNX Runtime and on torch.

Run: ``python -m bench.embedder [PATH] [--texts 600]`` (needs the ``embeddings`` extra). The
texts are the dialogue turns of a LoCoMo-format file (default: the development split in
``../shared/data/locomo_dev.json`` beside the repository), the first ``--texts`` of them.

Per runtime, each in a fresh process: seconds until ready (imports, loading, one embedding; the
fp32 ONNX graph already exported) and the peak resident memory after embedding all the texts in
one call; then, in this process, texts per second embedding all the texts in one call (best of
three) and the median latency of one short query (of 50). Then the lowest and the mean cosine
between each runtime's vectors and torch's for the same text.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from membrane_es.embedding.protocol import Embedder

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared/data/locomo_dev.json"
QUERY = "When did Melanie go camping in June?"
READY = {
    "int8": "from membrane_es.embedding.minilm_int8 import load as E",
    "onnx": "from membrane_es.embedding.onnx_runtime import OnnxEmbedder as E",
    "torch": "from membrane_es.embedding import SentenceTransformerEmbedder as E",
}
NAMES = {
    "int8": "int8, ONNX Runtime (default)",
    "onnx": "fp32, ONNX Runtime",
    "torch": "fp32, torch",
}


def turns(path: Path, count: int) -> list[str]:
    texts: list[str] = []
    for item in json.loads(path.read_text()):
        for key, value in item["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                texts.extend(turn["text"] for turn in value)
    return texts[:count]


def fresh_process(runtime: str, texts: list[str]) -> tuple[float, float]:
    """A fresh interpreter's time to import, load and embed one text, and its peak resident
    memory (MB) once it has embedded ``texts`` in one call."""
    child = (
        "import json, resource, sys, time; start = time.perf_counter(); "
        f"{READY[runtime]}; e = E(); e.embed(['ready']); ready = time.perf_counter() - start; "
        "e.embed(json.loads(sys.stdin.read())); "
        "print(ready, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    done = subprocess.run(
        [sys.executable, "-c", child],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
    )
    ready, peak = done.stdout.strip().splitlines()[-1].split()
    return float(ready), float(peak)


def throughput(embedder: Embedder, texts: list[str]) -> float:
    embedder.embed(texts[:32])
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        embedder.embed(texts)
        best = min(best, time.perf_counter() - started)
    return len(texts) / best


def query_latency(embedder: Embedder) -> float:
    embedder.embed([QUERY])
    samples = []
    for _ in range(50):
        started = time.perf_counter()
        embedder.embed([QUERY])
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", type=Path, nargs="?", default=DEFAULT_DATA)
    parser.add_argument("--texts", type=int, default=600)
    args = parser.parse_args()
    from membrane_es.embedding import SentenceTransformerEmbedder, minilm_int8
    from membrane_es.embedding.onnx_runtime import OnnxEmbedder

    texts = turns(args.path, args.texts)
    runtimes: dict[str, Embedder] = {
        "int8": minilm_int8.load(),
        "onnx": OnnxEmbedder(),  # exports the graph first if the cache has none
        "torch": SentenceTransformerEmbedder(),
    }
    rows = {}
    for name, embedder in runtimes.items():
        ready, peak = fresh_process(name, texts)
        rows[name] = (ready, peak, throughput(embedder, texts), query_latency(embedder))
    reference = runtimes["torch"].embed(texts)
    cosines = {name: (e.embed(texts) * reference).sum(axis=1) for name, e in runtimes.items()}
    print(f"{len(texts)} texts")
    print("| measurement | " + " | ".join(NAMES[name] for name in rows) + " | int8 ÷ torch |")
    print("| --- |" + " --- |" * (len(rows) + 1))
    figures = [
        ("ready in a fresh process (imports, load, one embedding)", 0, "{:.2f} s", 1),
        ("peak resident memory, all the texts embedded", 1, "{:.0f} MB", 1),
        ("texts/s, one call", 2, "{:.0f}", 1),
        ("one query, median", 3, "{:.1f} ms", 1e3),
    ]
    for label, at, shape, scale in figures:
        cells = [shape.format(rows[name][at] * scale) for name in rows]
        ratio = rows["int8"][at] / rows["torch"][at]
        print(f"| {label} | " + " | ".join(cells) + f" | {ratio:.2f}× |")
    lowest = " | ".join(f"{cosines[name].min():.5f}" for name in rows)
    mean = " | ".join(f"{cosines[name].mean():.5f}" for name in rows)
    print(f"| cosine with torch's vector, lowest | {lowest} | |")
    print(f"| cosine with torch's vector, mean | {mean} | |")


if __name__ == "__main__":
    main()
