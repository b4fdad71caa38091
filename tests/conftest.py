"""Shared fixtures: a tiny tokenizer + BERT built from config (no hub), and a small JSONL corpus.

The text comes from Python's own documentation topics (``pydoc_data``), present on every Python install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from corpus_files import _topic_texts, lra_dir  # noqa: F401  (lra_dir: a fixture for every test)

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The test-only modules that system tests name in their configs, trusted the way a user lists their own
# (configs are data: lit_docemb/commands/trust.py refuses every other module).
os.environ.setdefault("LIT_DOCEMB_ALLOW", "cpu_deepspeed,resume_probe,failing_method,step_report")


@pytest.fixture(autouse=True)
def _isolated_process_state():
    """Each test starts from the environment and the distributed state the previous one found.

    Lightning and DeepSpeed export ``LOCAL_RANK``, ``MASTER_PORT`` and friends into ``os.environ`` when an
    in-process trainer sets up a strategy. Left behind, they make every later ``fit --trainer.devices=2``
    subprocess believe its ranks were launched externally: rank 0 never starts rank 1 and waits forever.

    The same holds for wandb, as the end of a ``fit`` process leaves it: no run open for the next test's fit to log
    into, and no ``WANDB_SERVICE`` naming a wandb service. A session fixture's fit starts that service before any
    test saves the environment, and a test may tear it down (``wandb.teardown()``): restoring the variable would
    send every later fit, in this process or a subprocess, to a socket that is gone.
    """
    import torch.distributed as dist

    saved = dict(os.environ)
    yield
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.run.finish()
    os.environ.clear()
    os.environ.update(saved)
    os.environ.pop("WANDB_SERVICE", None)  # this process keeps its connection; a subprocess starts its own service
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory) -> str:
    """A folder with a 1,000-token WordPiece tokenizer and a 2-layer, 32-dim BERT (random weights, seed 0)."""
    import torch
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator((t for _, t in _topic_texts()),
                            trainers.WordPieceTrainer(vocab_size=1000, special_tokens=special))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    assert len(tokenizer) == 1000, len(tokenizer)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    path = tmp_path_factory.mktemp("tiny_bert")
    with torch.random.fork_rng():  # the same weights whichever test asks first (bf16 tolerances depend on them)
        torch.manual_seed(0)
        model = BertForMaskedLM(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_encoder_dir):
    """The tiny encoder's WordPiece tokenizer, for collators that tokenize."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_encoder_dir)


@pytest.fixture(scope="session")
def no_dropout_encoder_dir(tiny_encoder_dir, tmp_path_factory) -> str:
    """The tiny BERT with dropout off, so that a plain forward is an exact reference for split ones."""
    path = tmp_path_factory.mktemp("tiny_bert_no_dropout")
    shutil.copytree(tiny_encoder_dir, path, dirs_exist_ok=True)
    config = json.loads((path / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


@pytest.fixture(scope="session")
def headless_encoder_dir(tiny_encoder_dir, tmp_path_factory) -> str:
    """The tiny BERT saved without its MLM head (with BERT's pooler), as sentence-transformers models are."""
    from transformers import AutoTokenizer, BertForMaskedLM, BertModel

    with_head = BertForMaskedLM.from_pretrained(tiny_encoder_dir)
    headless = BertModel(with_head.config)
    headless.load_state_dict(with_head.bert.state_dict(), strict=False)
    path = tmp_path_factory.mktemp("headless_bert")
    headless.save_pretrained(path)
    AutoTokenizer.from_pretrained(tiny_encoder_dir).save_pretrained(path)
    return str(path)


def write_corpus_jsonl(path: Path, n_documents: int | None = None) -> Path:
    """Python documentation topics as sectioned documents in lit_docemb JSONL."""
    with open(path, "w", encoding="utf-8") as f:
        for name, text in _topic_texts()[:n_documents]:
            paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
            sections = [{"heading": "", "text": " ".join(paragraphs[:2])}]
            sections += [{"heading": f"part {i}", "text": p} for i, p in enumerate(paragraphs[2:], 1)]
            f.write(json.dumps({"id": name, "title": name, "sections": sections}) + "\n")
    return path


@pytest.fixture(scope="session")
def corpus_jsonl(tmp_path_factory) -> str:
    return str(write_corpus_jsonl(tmp_path_factory.mktemp("corpus") / "docs.jsonl"))


# --- GPU tests: deselected with one summary line where torch sees no GPU (CI has none) ---------------------------
_without_gpu: list[str] = []


def pytest_collection_modifyitems(config, items) -> None:
    import torch

    if torch.cuda.is_available():
        return
    gpu = [item for item in items if item.get_closest_marker("cuda")]
    if gpu:
        config.hook.pytest_deselected(items=gpu)
        items[:] = [item for item in items if not item.get_closest_marker("cuda")]
        _without_gpu.extend(item.nodeid for item in gpu)
        if hasattr(config, "workeroutput"):  # a pytest-xdist worker: its controller prints the summary
            config.workeroutput["cuda_deselected"] = _without_gpu


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """Under pytest-xdist (``-n 2``) each worker collects and deselects the GPU tests itself: the controller, which
    collects nothing, hears of them as each worker ends."""
    output = getattr(node, "workeroutput", {})
    _without_gpu.extend(n for n in output.get("cuda_deselected", []) if n not in _without_gpu)


def pytest_terminal_summary(terminalreporter) -> None:
    if _without_gpu:
        terminalreporter.write_line(f"{len(_without_gpu)} CUDA test(s) deselected: torch sees no GPU here (on a GPU "
                                    "machine: python -m pytest -m cuda)")


# --- skips are failures where everything must run -------------------------------------------------------------
_skipped: list[str] = []


def pytest_runtest_logreport(report) -> None:
    if report.skipped and report.when in ("setup", "call"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus) -> None:
    """Under CI (``CI=true``) or with ``LIT_DOCEMB_NO_SKIPS=1`` a skipped test fails the run: a green suite
    with silent skips is not green. The README lists what each skip needs."""
    strict = os.environ.get("CI", "").lower() in ("1", "true") or os.environ.get("LIT_DOCEMB_NO_SKIPS") == "1"
    if strict and _skipped and session.exitstatus == 0:
        print(f"\n{len(_skipped)} test(s) skipped, which CI does not allow:\n  " + "\n  ".join(_skipped))
        session.exitstatus = 1
