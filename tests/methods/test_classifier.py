"""Classification fine-tuning: label handling, starting from a pretraining checkpoint, learning a separable
set, and every classification config through the CLI (fast_dev_run)."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from corpus_files import labelled_docs, write_labelled_folder
from journeys import with_pieces

from lit_docemb.commands import main
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.corpora.labelled import LabelledTextDataModule
from lit_docemb.errors import ConfigError
from lit_docemb.methods import DocSplit, DocumentClassifier, GraphRoBERTa
from lit_docemb.data import PassageSpec
from lit_docemb.models import EncoderSpec

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").rglob("classify_*.yaml"))
WORDS = {"sea": "tide wave boat harbour sailor salt shore anchor", "code": "compiler function loop variable bug "
         "python stack module"}


def test_unknown_and_missing_labels_are_skipped_and_counted(tiny_encoder_dir):
    model = DocumentClassifier(DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), mlm_weight=0.0),
                               labels=["code", "sea"])
    docs = labelled_docs(4) + [Document("x", sections=[Section("", "no label")]),
                               Document("y", sections=[Section("", "odd")], label="weather")]
    batch = model.collator("fit")(docs)
    assert batch.skipped == 2 and batch.targets.tolist() == [0, 1, 0, 1]
    assert batch.inputs.ids == [d.id for d in docs[:4]]


def test_an_empty_evaluation_batch_leaves_the_metric_untouched(tiny_encoder_dir):
    """Under DDP a rank's share of the last validation batch can be empty (every rank runs as many batches)."""
    model = DocumentClassifier(DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), mlm_weight=0.0),
                               labels=["code", "sea"])
    model.validation_step(model.collator("validate")([Document("x", sections=[Section("", "no label")])]), 0)
    model.validation_step(model.collator("validate")(labelled_docs(2)), 1)
    assert model.val_f1.compute().item() >= 0.0  # one update: the empty batch did not reach torchmetrics


def test_labels_must_be_distinct(tiny_encoder_dir):
    with pytest.raises(ValueError, match="at least 2 distinct classes"):
        DocumentClassifier(DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), mlm_weight=0.0), labels=["a", "a"])


def test_fit_checks_the_labels_against_a_labelled_corpus(tiny_encoder_dir, tmp_path, caplog):
    """The DataModule declares LabelledDocuments: none of the configured labels in its training split is a one-line
    error, some of them a warning naming the others."""
    data = LabelledTextDataModule(str(write_labelled_folder(tmp_path / "set")), batch_size=8, num_workers=0,
                                  val_fraction=0.0)
    data.setup("fit")

    def setup_with(labels: list[str]) -> None:
        model = DocumentClassifier(DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), mlm_weight=0.0), labels)
        model.trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False)
        model.trainer.datamodule = data  # what Trainer.fit(model, data) sets before the method's setup
        model.setup("fit")

    with pytest.raises(ConfigError, match=r"none of model.init_args.labels \['news', 'sport'\] occurs in the training "
                                          r"data, whose labels are \['code', 'sea'\]"):
        setup_with(["news", "sport"])
    with caplog.at_level("WARNING", logger="lit_docemb.methods.classifier"):
        setup_with(["code", "news"])
    assert "training labels not in model.init_args.labels are skipped: ['sea']" in caplog.text


def test_starts_from_the_pretraining_checkpoint(tiny_encoder_dir, tmp_path):
    torch.manual_seed(0)
    pretrained = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16, passages=PassageSpec(max_passage_tokens=32))
    torch.save({"state_dict": pretrained.state_dict()}, tmp_path / "pre.ckpt")
    torch.manual_seed(1)
    fresh = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16, passages=PassageSpec(max_passage_tokens=32))
    model = DocumentClassifier(fresh, labels=["code", "sea"], checkpoint=str(tmp_path / "pre.ckpt"))
    for (name, a), b in zip(pretrained.state_dict().items(), model.backbone.state_dict().values()):
        assert torch.equal(a, b), name
    other = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=8,
                         passages=PassageSpec(max_passage_tokens=32))  # another architecture
    torch.save({"state_dict": other.state_dict()}, tmp_path / "other.ckpt")
    with pytest.raises(ValueError, match="does not fit GraphRoBERTa as configured"):
        DocumentClassifier(fresh, labels=["code", "sea"], checkpoint=str(tmp_path / "other.ckpt"))
    partial = {k: v for k, v in pretrained.state_dict().items() if "project" not in k}
    torch.save({"state_dict": partial}, tmp_path / "partial.ckpt")
    with pytest.raises(ValueError, match="2 weights missing"):
        DocumentClassifier(fresh, labels=["code", "sea"], checkpoint=str(tmp_path / "partial.ckpt"))


def test_fine_tuning_separates_a_separable_set(tiny_encoder_dir, tmp_path):
    torch.manual_seed(0)
    model = DocumentClassifier(DocSplit(EncoderSpec(tiny_encoder_dir, max_length=48),
                                        mlm_weight=0.0), labels=["code", "sea"],
                               optimizer=lambda params: torch.optim.AdamW(params, lr=3e-3))
    data = LabelledTextDataModule(str(write_labelled_folder(tmp_path / "set")), batch_size=8, num_workers=0,
                                  val_fraction=0.0)
    trainer = L.Trainer(accelerator="cpu", max_steps=30, logger=False, enable_progress_bar=False,
                        enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(model, data)
    result = trainer.test(model, data, verbose=False)[0]
    assert result["test/accuracy"] == 1.0 and result["test/macro_f1"] == 1.0


@pytest.mark.parametrize("config", CONFIGS)
def test_every_classification_config_runs_fast_dev_run(config, tiny_encoder_dir, tmp_path):
    folder = write_labelled_folder(tmp_path / "set")
    (folder / "dev.jsonl").write_text((folder / "test.jsonl").read_text())  # Hyperpartisan's published dev split
    graph = "graph_roberta" in config
    size = ["--model.init_args.backbone.init_args.node_dim=16",
            "--model.init_args.backbone.init_args.passages.max_passage_tokens=64"] if graph else [
            "--model.init_args.backbone.init_args.encoder.max_length=64"]
    settings = with_pieces(yaml.safe_load((ROOT / config).read_text(encoding="utf-8")), (ROOT / config).parent)
    # the config's corpus replaced whole (its release's columns, splits and formats are not this fixture's)
    published = settings["data"]["init_args"].get("val_split")
    validation = {"val_split": "dev", "val_fraction": 0.0} if published else {"val_fraction": 0.25}
    settings["data"] = {"class_path": "lit_docemb.data.LabelledTextDataModule", "init_args": {
        "source": str(folder), "label_column": "label", "batch_size": 4, "num_workers": 0, **validation}}
    written = tmp_path / "configs" / "config.yaml"  # not in the run folder, which holds the run's own config.yaml
    written.parent.mkdir()
    written.write_text(yaml.safe_dump(settings), encoding="utf-8")
    cli = main(["fit", "--config", str(written),
                f"--model.init_args.backbone.init_args.encoder.name={tiny_encoder_dir}", *size,
                "--model.init_args.checkpoint=null", "--model.init_args.labels=[code,sea]",
                "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32-true",
                "--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={tmp_path}",
                "--trainer.fast_dev_run=2", f"--trainer.default_root_dir={tmp_path}"])
    assert cli.trainer.global_step == 2
    assert "val/macro_f1" in cli.trainer.callback_metrics
    # the nested backbone records its own arguments, not the classifier's (LightningCLI hands both the latter)
    backbone = cli.model.backbone.hparams
    assert (backbone["passages"]["init_args"]["max_passage_tokens"] if graph else backbone["encoder"]["init_args"]["max_length"]) == 64
    assert "labels" not in cli.model.backbone.hparams
    assert cli.model.hparams.labels == ["code", "sea"]


def long_document(identifier: str, label: str | None = None) -> Document:
    words = " ".join(f"word{i}" for i in range(40))  # 40 words: 13 passages of 3 words
    return Document(identifier, sections=[Section("", words)], label=label)


def test_graph_roberta_fine_tuning_trains_on_max_passages_and_infers_on_max_passages_inference(tiny_encoder_dir):
    """Seed 000, Appendix A: up to 50 passages per document in training, 100 at inference (here 2 and 5)."""
    backbone = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                            passages=PassageSpec(words_per_passage=3, max_passage_tokens=16, max_passages=2,
                                                 max_passages_inference=5), cache_passages=False)
    model = DocumentClassifier(backbone, labels=["code", "sea"])
    docs = [long_document("a", "sea"), long_document("b", "code")]
    assert model.collator("fit")(docs).inputs.graphs.passage_counts.tolist() == [2, 2]
    assert model.collator("validate")(docs).inputs.graphs.passage_counts.tolist() == [5, 5]
    assert model.collator("predict")(docs).graphs.passage_counts.tolist() == [5, 5]


def test_a_frozen_backbone_trains_the_head_only(tiny_encoder_dir):
    """DocSplit Appendix A.1: only the last layer is trained; the encoder's weights and its dropout stay off."""
    torch.manual_seed(0)
    model = DocumentClassifier(DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32),
                                        mlm_weight=0.0), labels=["code", "sea"],
                               freeze_backbone=True)
    before = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    head = model.head[1].weight.clone()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    assert not model.backbone.training and model.head.training
    batch = model.collator("fit")(labelled_docs(4))
    model.losses(batch)["ce_loss"].backward()
    optimizer.step()
    assert all(torch.equal(before[k], v) for k, v in model.backbone.state_dict().items())
    assert not torch.equal(head, model.head[1].weight)
    assert not any(p.requires_grad for p in model.backbone.parameters())


def test_the_head_learns_at_its_own_multiple_of_the_rate(tiny_encoder_dir):
    """A random head at the backbone's fine-tuning rate learns slowly: ``head_learning_rate_scale`` gives it k x."""
    def model(**kwargs):
        return DocumentClassifier(DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), mlm_weight=0.0),
                                  labels=["code", "sea"], optimizer=lambda p: torch.optim.AdamW(p, lr=1e-4), **kwargs)

    one = model().configure_optimizers()
    assert [group["lr"] for group in one.param_groups] == [1e-4]
    scaled = model(head_learning_rate_scale=20.0)
    groups = scaled.configure_optimizers().param_groups
    assert [group["lr"] for group in groups] == pytest.approx([1e-4, 2e-3])
    assert {id(p) for p in groups[1]["params"]} == {id(p) for p in scaled.head.parameters()}
    assert sum(len(g["params"]) for g in groups) == len([p for p in scaled.parameters() if p.requires_grad])
    frozen = model(head_learning_rate_scale=20.0, freeze_backbone=True).configure_optimizers().param_groups
    assert [group["lr"] for group in frozen] == pytest.approx([2e-3])
    with pytest.raises(ValueError, match="head_learning_rate_scale"):
        model(head_learning_rate_scale=0.0)
