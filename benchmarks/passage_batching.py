"""Padding and tokens/s of four ways to batch a hierarchical model's passages (issue 12, item 2).

Graph-RoBERTa encodes every passage of a batch's documents with a transformer, then runs a graph over the
passage vectors; the transformer is nearly all the cost, and what it spends on padding is lost. On a
length-skewed corpus (document lengths log-normal, every section's last passage short), the same batches
(built by the library's collator, :class:`~lit_docemb.views.graph_roberta.PassageGraphBuilder`) are encoded,
forward and backward, in four layouts:

* **dense per-document padding**: every document padded to the batch's most passages and every passage to
  the longest, a (B, P_max, T_max) tensor (padding passages hold one unmasked pad token), encoded in
  sub-batches of ``--token-budget`` padded tokens (default 4,096, a CPU-sized sub-batch: with the library's
  default of 32,768, a GPU's, these small batches fit in one sub-batch, where bucketing cannot change anything);
* **one call per document**: each document's passages padded to its own longest passage, one encoder call
  per document;
* **flattened, document order** (``bucket_passages=False``): the passages of all documents in one list, cut
  into consecutive sub-batches within the budget, each trimmed to its own longest passage;
* **flattened, bucketed by length** (``bucket_passages=True``, the default): the same, sorted by length first,
  so that each sub-batch holds passages of alike length.

The last two are :meth:`GraphDocumentEncoder.passage_nodes` itself. tokens/s counts real (non-padding) tokens
per wall second, the median over interleaved repetitions (each layout in turn, the order rotating); the ratio
is the median of the per-repetition ratios. Goal: bucketed ≥ 1.5 × the dense per-document padding.
CoLDE's chunks would go through the same ``split_rows_by_token_budget`` helper; CoLDE is not in the library
yet, so only Graph-RoBERTa's passages are measured.

Usage::

    python benchmarks/passage_batching.py                      # 4 batches of 8 documents, 3 repetitions
    python benchmarks/passage_batching.py --batches 8 --batch-size 16 --hidden 256 --layers 4
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import random
import statistics
import tempfile
import time

import torch
from transformers import AutoTokenizer

from common import load_line, machine_line, median_ratio, resampled_documents, write_bert
from lit_docemb.data.core.batches import PassageGraphBatch, TokenBatch
from lit_docemb.data.core.passage_spec import PassageSpec
from lit_docemb.data.core.tokens import split_token_batch, take_rows, token_lengths
from lit_docemb.views.graph_roberta import PassageGraphBuilder
from lit_docemb.models import HFEncoder
from lit_docemb.models.graph_document import GraphDocumentEncoder


def skewed_corpus(count: int, median_words: int, sigma: float, seed: int) -> list:
    """``count`` documents whose word counts are log-normal around ``median_words`` (60 to 20,000 words)."""
    rng = random.Random(seed)
    lengths = [min(20_000, max(60, round(median_words * rng.lognormvariate(0, sigma)))) for _ in range(count)]
    return [resampled_documents(1, words, ["pydoc"], seed=seed * 100_003 + i)[0] for i, words in enumerate(lengths)]


def dense_layout(graphs: PassageGraphBatch, budget: int) -> list[TokenBatch]:
    """(B * P_max, T_max) rows: every document padded to the most passages, every passage to the longest."""
    counts = graphs.passage_counts.tolist()
    width, most = graphs.passages.input_ids.shape[1], max(counts)
    input_ids = torch.zeros(len(counts) * most, width, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    attention_mask[:, 0] = 1  # a padding passage still has one position attended (no all-masked softmax)
    start = 0
    for document, count in enumerate(counts):
        rows = slice(document * most, document * most + count)
        input_ids[rows] = graphs.passages.input_ids[start: start + count]
        attention_mask[rows] = graphs.passages.attention_mask[start: start + count]
        start += count
    rows_per_call = max(1, budget // width)
    return [TokenBatch(input_ids[i: i + rows_per_call], attention_mask[i: i + rows_per_call])
            for i in range(0, len(input_ids), rows_per_call)]


def per_document_layout(graphs: PassageGraphBatch, budget: int) -> list[TokenBatch]:
    """Each document's passages alone, padded to its own longest (split further only beyond the budget)."""
    parts, start = [], 0
    for count in graphs.passage_counts.tolist():
        document = take_rows(graphs.passages, torch.arange(start, start + count))
        parts += split_token_batch(document, budget)[0]
        start += count
    return parts


def train_pass(model: GraphDocumentEncoder, parts: list[TokenBatch]) -> None:
    """Forward and backward of the passage vectors of ``parts``, one encoder call per part."""
    for part in parts:
        torch.tanh(model.project(model.encoder(part.input_ids, part.attention_mask))).sum().backward()


def library_pass(model: GraphDocumentEncoder, graphs: PassageGraphBatch) -> None:
    model.passage_nodes(graphs.passages).sum().backward()


def padded_positions(model: GraphDocumentEncoder, graphs: PassageGraphBatch, layout: str, budget: int) -> int:
    if layout == "dense":
        return sum(p.input_ids.numel() for p in dense_layout(graphs, budget))
    if layout == "per_document":
        return sum(p.input_ids.numel() for p in per_document_layout(graphs, budget))
    parts, _ = split_token_batch(graphs.passages, budget, sort_by_length=layout == "bucketed")
    return sum(p.input_ids.numel() for p in parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8, help="documents per batch")
    parser.add_argument("--median-words", type=int, default=600)
    parser.add_argument("--sigma", type=float, default=1.0, help="spread of log(document words)")
    parser.add_argument("--max-passages", type=int, default=50, help="Graph-RoBERTa's default")
    parser.add_argument("--max-passage-tokens", type=int, default=192, help="Graph-RoBERTa's default")
    parser.add_argument("--token-budget", type=int, default=4096,
                        help="passage_token_budget (library default 32,768, a GPU's; these batches would fit it whole)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    with tempfile.TemporaryDirectory(prefix="lit_docemb_passages_") as tmp:
        folder = write_bert(os.path.join(tmp, "bert"), args.hidden, args.layers, max_positions=args.max_passage_tokens)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = GraphDocumentEncoder(HFEncoder(folder, pooling="cls"), node_dim=64,
                                     passage_token_budget=args.token_budget)
    builder = PassageGraphBuilder(tokenizer, PassageSpec(max_passage_tokens=args.max_passage_tokens))
    documents = skewed_corpus(args.batches * args.batch_size, args.median_words, args.sigma, seed=0)
    batches = [builder(builder.passages(documents[i: i + args.batch_size], args.max_passages))
               for i in range(0, len(documents), args.batch_size)]
    real = sum(int(g.passages.attention_mask.sum()) for g in batches)
    passages = torch.cat([g.passage_counts for g in batches]).float()
    lengths = torch.cat([token_lengths(g.passages.attention_mask) for g in batches]).float()

    def run(layout: str) -> None:
        for graphs in batches:
            if layout == "dense":
                train_pass(model, dense_layout(graphs, args.token_budget))
            elif layout == "per_document":
                train_pass(model, per_document_layout(graphs, args.token_budget))
            else:
                model.bucket_by_length = layout == "bucketed"
                library_pass(model, graphs)
        model.zero_grad(set_to_none=True)

    names = {"dense": "dense per-document padding (B, P_max, T_max)", "per_document": "one encoder call per document",
             "flat": "flattened, document order (`bucket_passages=False`)",
             "bucketed": "**flattened, bucketed by length** (`bucket_passages=True`, default)"}
    seconds: dict[str, list[float]] = {name: [] for name in names}
    load_before = os.getloadavg()
    run("bucketed")  # warm-up
    for repeat in range(args.repeats):
        order = list(names)[repeat % len(names):] + list(names)[:repeat % len(names)]
        for layout in order:
            started = time.perf_counter()
            run(layout)
            seconds[layout].append(time.perf_counter() - started)
        print(f"repetition {repeat + 1}/{args.repeats}: " + ", ".join(f"{k} {v[-1]:.1f}s" for k, v in seconds.items()),
              flush=True)
    load_after = os.getloadavg()

    print(f"\n{len(documents)} documents in {args.batches} batches of {args.batch_size} (words log-normal, median "
          f"{args.median_words}, sigma {args.sigma}; passages per document {passages.min():.0f}-{passages.max():.0f}, "
          f"median {passages.median():.0f}; passage tokens {lengths.min():.0f}-{lengths.max():.0f}, median "
          f"{lengths.median():.0f}), passage encoder: random-init BERT {args.layers} layers × {args.hidden}, "
          f"forward + backward, fp32, token budget {args.token_budget:,}; {machine_line()}; "
          f"{args.repeats} interleaved repetitions.\n")
    print("| layout | padding fraction | encoder calls | tokens/s (median) | × dense | × document order |")
    print("|---|---:|---:|---:|---:|---:|")
    for layout, name in names.items():
        padded = sum(padded_positions(model, g, layout, args.token_budget) for g in batches)
        calls = sum(len(dense_layout(g, args.token_budget)) if layout == "dense" else
                    len(per_document_layout(g, args.token_budget)) if layout == "per_document" else
                    len(split_token_batch(g.passages, args.token_budget, layout == "bucketed")[0]) for g in batches)
        print(f"| {name} | {1 - real / padded:.1%} | {calls} | {real / statistics.median(seconds[layout]):,.0f} | "
              f"{median_ratio(seconds['dense'], seconds[layout]):.2f} | "
              f"{median_ratio(seconds['flat'], seconds[layout]):.2f} |")
    ratio = median_ratio(seconds["dense"], seconds["bucketed"])
    print(f"\nGoal bucketed ≥ 1.5 × dense per-document padding: {ratio:.2f}× {'met' if ratio >= 1.5 else 'MISSED'}. "
          f"{load_line(load_before, load_after)}.")


if __name__ == "__main__":
    main()
