"""Shared helpers for tests that run commands: tiny-encoder CLI arguments, saved runs, embed runs, a toy method."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch
import yaml

from lit_docemb.commands import main
from lit_docemb.data.core.document import Document
from lit_docemb.methods.base import EmbeddingMethod


class LetterBatch:
    def __init__(self, ids, vectors, skipped):
        self.ids, self.vectors, self.skipped = ids, vectors, skipped

    def __len__(self):
        return len(self.ids)


def collate_letters(documents):
    kept = [d for d in documents if "skip" not in d.text]
    vectors = torch.tensor([[d.text.count(c) + 0.1 for c in "aeiou"] for d in kept]).reshape(len(kept), 5)
    return LetterBatch([d.id for d in kept], vectors, len(documents) - len(kept))


def tiny_args(encoder: str, corpus: str, root: Path) -> list[str]:
    return [
        "--model=lit_docemb.methods.DocSplit", f"--model.encoder.name={encoder}", "--model.encoder.max_length=64",
        "--data=lit_docemb.data.JSONLDataModule", f"--data.paths=[{corpus}]", "--data.batch_size=4",
        "--data.num_workers=0", "--data.val_fraction=0.2", "--trainer.accelerator=cpu", "--trainer.devices=1",
        "--trainer.logger=false", "--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={root}",
    ]


def write_tsv(path: Path, documents: list[Document], bad_lines: bool = True) -> Path:
    lines = ["id\ttitle\ttext"] + [f"{d.id}\t{d.title}\t{d.text}" for d in documents]
    if bad_lines:
        lines[3:3] = ["no tabs on this line", "\tan empty id\tx"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def save_run(method: L.LightningModule, root: Path, init_args: dict) -> tuple[Path, Path]:
    """A run folder as a fit leaves it: the model section of config.yaml and a Lightning checkpoint."""
    checkpoint = {"state_dict": method.state_dict(), "pytorch-lightning_version": L.__version__}
    method.on_save_checkpoint(checkpoint)
    root.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, root / "last.ckpt")
    config = {"model": {"class_path": f"lit_docemb.methods.{type(method).__name__}", "init_args": init_args}}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    return root / "config.yaml", root / "last.ckpt"


def run_embed(config: Path, ckpt: Path, data: Path, out: Path, *extra: str) -> None:
    main(["embed", "--config", str(config), "--ckpt_path", str(ckpt), "--input", str(data), "--output", str(out),
          "--batch_size", "3", "--accelerator", "cpu", "--devices", "1", "--progress_bar", "false", *extra])


class Letters(EmbeddingMethod):
    """Embeds a document as the counts of a few letters in its text; its collator drops texts containing 'skip'."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(()))

    def collator(self, stage: str):
        return collate_letters

    def losses(self, batch):
        raise NotImplementedError("evaluation only")

    def embed(self, batch):
        return batch.vectors * self.scale
