"""The default model on its two runtimes, side by side: ONNX Runtime and torch.

Run: ``python -m bench.embedder [PATH] [--texts 600]`` (needs the ``embeddings`` extra). The
texts are the dialogue turns of a LoCoMo-format file (default: the development split in
``../shared/data/locomo_dev.json`` beside the repository), the first ``--texts`` of them.

Per runtime: seconds until ready in a fresh process (imports, loading, one embedding; the ONNX
graph already exported), texts per second embedding all the texts in one call (best of
three), and the median latency of one short query (of 50). Then the lowest cosine between the
two runtimes' vectors of the same text.
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
    "onnx": "from membrane_es.embedding.onnx_runtime import OnnxEmbedder as E",
    "torch": "from membrane_es.embedding import SentenceTransformerEmbedder as E",
}


def turns(path: Path, count: int) -> list[str]:
    texts: list[str] = []
    for item in json.loads(path.read_text()):
        for key, value in item["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                texts.extend(turn["text"] for turn in value)
    return texts[:count]


def seconds_to_ready(runtime: str) -> float:
    """A fresh interpreter's time to import, load and embed one text."""
    child = (
        "import time; start = time.perf_counter(); "
        f"{READY[runtime]}; E().embed(['ready']); print(time.perf_counter() - start)"
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


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
    from membrane_es.embedding import SentenceTransformerEmbedder
    from membrane_es.embedding.onnx_runtime import OnnxEmbedder

    texts = turns(args.path, args.texts)
    runtimes: dict[str, Embedder] = {
        "onnx": OnnxEmbedder(),  # exports the graph first if the cache has none
        "torch": SentenceTransformerEmbedder(),
    }
    rows = {}
    for name, embedder in runtimes.items():
        rows[name] = (seconds_to_ready(name), throughput(embedder, texts), query_latency(embedder))
    cosine = (runtimes["onnx"].embed(texts) * runtimes["torch"].embed(texts)).sum(axis=1)
    onnx, torch = rows["onnx"], rows["torch"]
    print(f"{len(texts)} texts; lowest cosine between the runtimes' vectors {cosine.min():.6f}")
    print("| measurement | ONNX Runtime | torch | ONNX ÷ torch |")
    print("| --- | --- | --- | --- |")
    print(
        f"| ready in a fresh process | {onnx[0]:.2f} s | {torch[0]:.2f} s | "
        f"{onnx[0] / torch[0]:.2f}× |"
    )
    print(f"| texts/s, one call | {onnx[1]:.0f} | {torch[1]:.0f} | {onnx[1] / torch[1]:.2f}× |")
    print(
        f"| one query, median | {onnx[2] * 1e3:.1f} ms | {torch[2] * 1e3:.1f} ms | "
        f"{onnx[2] / torch[2]:.2f}× |"
    )


if __name__ == "__main__":
    main()
