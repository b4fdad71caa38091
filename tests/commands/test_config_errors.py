"""Config errors fail before training starts with one line naming the key and the fix (issue 11, item 2):
unknown keys, wrong types, missing data paths, options that cannot go together. Through the real CLI."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from corpus_files import _write_wikir
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.strategies import DeepSpeedStrategy

from lit_docemb.commands import main
from lit_docemb.commands.cli import DocEmbCLI, one_line_parse_error
from lit_docemb.commands.section_errors import owner_key
from lit_docemb.data import (
    JSONLDataModule,
    MSMARCODataModule,
    PassageSpec,
    Robust04DataModule,
    WikipediaDataModule,
)
from lit_docemb.data.corpora.wikir import WIKIRDataModule
from lit_docemb.errors import ConfigError
from lit_docemb.methods import DocSplit, GraphRoBERTa
from lit_docemb.models import EncoderSpec


def fit_args(encoder: str, corpus: str, root: Path, *extra: str) -> list[str]:
    return ["fit", "--model=lit_docemb.methods.DocSplit", f"--model.encoder.name={encoder}", "--model.encoder.max_length=32",
            "--data=lit_docemb.data.JSONLDataModule", f"--data.paths=[{corpus}]", "--data.batch_size=2",
            "--data.num_workers=0", "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.logger=false",
            "--trainer.enable_progress_bar=false", "--trainer.max_steps=1", f"--trainer.default_root_dir={root}",
            *extra]


class TrainingStarted(Callback):
    def __init__(self) -> None:
        self.started = False

    def on_train_start(self, trainer, pl_module) -> None:
        self.started = True


def run_cli(args: list[str], capsys) -> str:
    """Runs the CLI, expects it to stop with status 2 and returns the one error line it printed on stderr (model
    loading may print progress bars before it)."""
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and err.endswith(errors[0] + "\n"), err[-2000:]
    return errors[0]


@pytest.mark.parametrize("extra, expected", [
    (["--model.init_args.temprature=0.1"], "error: model.init_args.temprature: unknown option of "
                                           "lit_docemb.methods.DocSplit (options: --model.help DocSplit)"),
    (["--data.batch_size=two"], "error: data.init_args.batch_size: Expected a <class 'int'>. Got value: two"),
    (["--data.max_documents=two"], "error: data.init_args.max_documents: Expected a <class 'int'>. Got value: two"),
    (["--model.encoder.pooling=max"], "error: model.init_args.encoder.pooling: Expected a typing.Literal['cls', "
                                      "'mean']. Got value: max"),
    (["--trainer.max_stepz=3"], "error: unrecognized arguments: --trainer.max_stepz=3"),
])
def test_unknown_keys_and_wrong_types_are_one_line_naming_the_key(tmp_path, capsys, extra, expected):
    err = run_cli(fit_args("unused-encoder", str(tmp_path / "docs.jsonl"), tmp_path, *extra), capsys)
    assert err.startswith(expected)  # and nothing else: no usage text, no union-subtype report


def test_unknown_key_in_a_config_file(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("model:\n  class_path: lit_docemb.methods.GraphRoBERTa\n  init_args:\n    encoder:\n"
                      "      name: x\n    passages:\n      graph: sections\n")
    err = run_cli(["fit", "--config", str(config)], capsys)
    assert err == ("error: model.init_args.passages.graph: Expected a typing.Literal['full', 'section']. Got value: "
                   "sections (options: --model.help GraphRoBERTa)")


@pytest.mark.parametrize("option", ["words_per_passage", "max_passage_tokens", "max_passages",
                                    "max_passages_inference", "title_passage", "graph"])
def test_a_passage_option_written_flat_names_its_place_in_the_passages_block(tmp_path, capsys, option):
    """A run config from before the ``passages`` block (its options flat under Graph-RoBERTa) stops in one line
    naming where the option went; nothing reads it as before."""
    config = tmp_path / "run.yaml"
    config.write_text("model:\n  class_path: lit_docemb.methods.GraphRoBERTa\n  init_args:\n    encoder:\n"
                      f"      name: x\n    {option}: 3\n")
    err = run_cli(["fit", "--config", str(config)], capsys)
    assert err == (f"error: model.init_args.{option}: unknown option of lit_docemb.methods.GraphRoBERTa; it is "
                   f"passages.{option} (options: --model.help GraphRoBERTa)")


def test_an_encoder_given_as_a_string_asks_for_the_block(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("model:\n  class_path: lit_docemb.methods.DocSplit\n  init_args:\n    encoder: x\n")
    err = run_cli(["fit", "--config", str(config)], capsys)
    assert err == ("error: model.init_args.encoder: got the string 'x' where a block of options is expected (encoder: "
                   "{name: x, pooling: ...}: lit_docemb.models.EncoderSpec) (options: --model.help DocSplit)")


def test_a_message_without_a_key_stays_as_it_is():
    assert one_line_parse_error("Subcommand 'fit' does not accept option 'x'\n") == \
        "Subcommand 'fit' does not accept option 'x'"


def test_missing_data_path_stops_before_training(tiny_encoder_dir, tmp_path, capsys):
    missing = tmp_path / "nowhere" / "docs.jsonl"
    started = TrainingStarted()
    with pytest.raises(ConfigError):  # what main() reports as one line
        DocEmbCLI(args=fit_args(tiny_encoder_dir, str(missing), tmp_path), trainer_defaults={"callbacks": [started]})
    assert not started.started
    err = run_cli(fit_args(tiny_encoder_dir, str(missing), tmp_path), capsys)
    assert err == (f"error: data.init_args.paths: {str(missing)!r} does not exist; set it to JSONL files (layout: "
                   f"python -m lit_docemb fit --data.help JSONLDataModule)")


@pytest.mark.parametrize("make, key", [
    (lambda p: JSONLDataModule([str(p / "a.jsonl")]), "paths"),
    (lambda p: MSMARCODataModule(str(p / "msmarco")), "root"),
    (lambda p: WIKIRDataModule(str(p / "wikir")), "root"),
    (lambda p: WIKIRDataModule(str(p), negatives_run=str(p / "run.txt")), "negatives_run"),
    (lambda p: Robust04DataModule([str(p)], topics=str(p / "topics.txt")), "topics"),
    (lambda p: WikipediaDataModule(str(p / "enwiki.parquet")), "source"),
])
def test_every_datamodule_names_its_missing_path(tmp_path, make, key):
    with pytest.raises(ConfigError, match=rf"^data\.init_args\.{key}: '.*' does not exist; set it to "):
        make(tmp_path).prepare_data()


def test_hub_names_are_not_paths(tmp_path):
    WikipediaDataModule("wikimedia/wikipedia").prepare_data()  # a hub name: nothing to check locally


def test_val_queries_from_train_larger_than_the_training_queries(tmp_path):
    root = _write_wikir(tmp_path / "wikir")  # 6 training queries
    dm = WIKIRDataModule(str(root), mode="retrieval", val_queries_from_train=6, cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match=r"^data\.init_args\.val_queries_from_train=6 holds out every one of the 6 "
                                          r"training queries .*set it below 6"):
        dm.setup("fit")
    dm = WIKIRDataModule(str(root), mode="retrieval", val_queries_from_train=2, cache_dir=str(tmp_path / "cache"))
    dm.setup("fit")
    assert {e.query_id for e in dm.train_set} | {e.query_id for e in dm.val_set} == {str(q) for q in range(6)}


def test_section_graph_on_a_corpus_without_sections(tiny_encoder_dir, tmp_path, capsys):
    corpus = tmp_path / "flat.jsonl"
    corpus.write_text("".join(f'{{"id": "{i}", "text": "Sentence one of {i}. Sentence two. Three."}}\n'
                              for i in range(6)))
    graph = ["--model=lit_docemb.methods.GraphRoBERTa", f"--model.encoder.name={tiny_encoder_dir}",
             "--model.node_dim=16", "--model.passages.max_passage_tokens=32",
             "--model.passages.words_per_passage=3", "--model.cache_passages=false", "--model.passages.graph=section"]
    args = fit_args(tiny_encoder_dir, str(corpus), tmp_path)[:1] + graph + fit_args(tiny_encoder_dir, str(corpus),
                                                                                     tmp_path)[4:]
    err = run_cli(args, capsys)
    assert err.startswith("error: model.init_args.passages.graph is 'section' but none of the first 6 documents of "
                          "JSONLDataModule has more than one section: set model.init_args.passages.graph to 'full'")
    assert not (tmp_path / "checkpoints").exists()


class OneProcessDeepSpeed(DeepSpeedStrategy):
    """Lightning's DeepSpeed strategy in this CPU process, without a process group (the fit below stops before
    DeepSpeed would build its engine)."""

    def setup_environment(self) -> None:
        pass


def test_grad_cache_with_deepspeed_stops_before_training(tiny_encoder_dir, corpus_jsonl, tmp_path):
    """Refused in the method's setup, before DeepSpeed builds its engine and before the first step."""
    started = TrainingStarted()
    model = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), grad_cache_token_budget=128)
    strategy = OneProcessDeepSpeed(stage=2, parallel_devices=[torch.device("cpu")])
    trainer = L.Trainer(accelerator="cpu", strategy=strategy, callbacks=[started], logger=False, max_steps=1,
                        default_root_dir=tmp_path,
                        enable_progress_bar=False)
    with pytest.raises(ConfigError, match="^model.init_args.grad_cache_token_budget is not supported with DeepSpeed"):
        trainer.fit(model, JSONLDataModule([corpus_jsonl], batch_size=2, num_workers=0))
    assert not started.started and trainer.global_step == 0
    from deepspeed import DeepSpeedEngine

    assert trainer.strategy.model is model and not isinstance(trainer.strategy.model, DeepSpeedEngine)  # no engine


def test_an_error_of_a_nested_class_is_named_where_the_class_is():
    def node(class_path, **init_args):
        return {"class_path": class_path, "init_args": init_args}

    graph = node("lit_docemb.methods.GraphRoBERTa", encoder=node("lit_docemb.models.EncoderSpec"),
                 passages=node("lit_docemb.data.PassageSpec"))
    wrapped = node("lit_docemb.methods.DocumentClassifier", backbone=graph)
    assert owner_key(wrapped, "model", GraphRoBERTa) == "model.init_args.backbone"
    assert owner_key(wrapped, "model", PassageSpec) == "model.init_args.backbone"  # the block's owner
    assert owner_key(wrapped, "model", EncoderSpec) == "model.init_args.backbone"
    assert owner_key(graph, "model", GraphRoBERTa) == "model"
    assert owner_key(graph, "model", EncoderSpec) == "model"
    two = node("lit_docemb.methods.Pair", first=graph, second=graph)
    assert owner_key(two, "model", GraphRoBERTa) == "model"  # named twice: the section, as before
