"""CTPE's Doc2VecC row (configs/baselines/doc2vecc/ctpe.yaml): plain Doc2VecC, DECA's backbone with the framework
Doc2VecCAlone, fitted on a CTPE task folder through the real CLI with the paper's settings, then scored by
``evaluate`` on the checkpoint. No augmentation is drawn: building one or reading WordNet raises in these tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from journeys import write_ctpe_task

from lit_docemb.commands import main
from lit_docemb.methods.deca_components import Doc2VecCAlone
from lit_docemb.views.deca import Doc2VecCCollator

ROOT = Path(__file__).resolve().parents[2]
TASK_CONFIG, PIECE = str(ROOT / "configs/ctpe/arxiv.yaml"), str(ROOT / "configs/baselines/doc2vecc/ctpe.yaml")


def fit(run: Path, *overrides: str):
    return main(["fit", "--config", TASK_CONFIG, "--config", PIECE, "--trainer.max_steps=2", "--trainer.logger=false",
                 f"--trainer.default_root_dir={run}", "--trainer.accelerator=cpu",
                 "--trainer.enable_progress_bar=false", "--data.init_args.num_workers=0", "--data.init_args.global_batch_size=8",
                 "--model.init_args.backbone.init_args.min_word_count=1", *overrides])


class WordNetLoaded(Exception):
    """Raised by the test's stand-ins for the thesaurus: the Doc2VecC row draws no augmentation."""


@pytest.fixture
def task_folder(tmp_path, monkeypatch):
    write_ctpe_task(tmp_path / "data" / "ctpe" / "arxiv")  # where configs/ctpe/arxiv.yaml reads it
    monkeypatch.chdir(tmp_path)

    def refuse(*args, **kwargs):
        raise WordNetLoaded

    monkeypatch.setattr("lit_docemb.augment.load_wordnet", refuse)
    monkeypatch.setattr("lit_docemb.augment.DocumentAugmenter.__init__", refuse)
    return tmp_path


def test_fit_then_evaluate_scores_the_task(task_folder):
    cli = fit(task_folder / "run")
    backbone = cli.model.backbone
    assert (backbone.corruption, backbone.negative_samples, backbone.word_embeddings.embedding_dim) == (0.9, 5, 100)
    assert cli.model.backbone_spec.window_size == 10 and isinstance(cli.model.framework, Doc2VecCAlone)
    assert cli.model.augmentation is None and cli.trainer.global_step == 2
    assert cli.trainer.max_epochs == 100 and len(cli.datamodule.train_set) == 40  # candidates and test papers
    out = task_folder / "scored"
    main(["evaluate", "--config", TASK_CONFIG, "--config", PIECE, "--ckpt_path",
          str(task_folder / "run/checkpoints/last.ckpt"), "--data.init_args.num_workers=0",
          "--model.init_args.backbone.init_args.min_word_count=1", "--output", str(out), "--accelerator", "cpu"])
    ranking = json.loads((out / "evaluation.json").read_text())["results"]["candidate_ranking"]
    assert ranking["ranking/candidates"] == 20 and ranking["ranking/queries"] == 20
    for name in ("P@20", "recall@20", "f1@20", "map", "ndcg", "bpref", "paper_map@20", "paper_ndcg@20", "paper_bpref"):
        assert 0.0 <= ranking[f"ranking/{name}"] <= 1.0, name
    assert ranking["ranking/map"] > 0.0


def test_the_loss_is_doc2vecc_alone_on_the_documents_own_words(task_folder):
    """Every training batch is the documents' own words, and the total loss (and so its gradient) is Doc2VecC's
    (eq. 2-3) alone; tests/methods/test_deca.py checks that term against a naive l_d."""
    method = fit(task_folder / "run").model.train()
    collate = method.collator("fit")
    assert type(collate) is Doc2VecCCollator
    batch = collate([method.trainer.datamodule.train_set[i] for i in range(8)])
    assert len(batch) + batch.skipped == 8 and len(batch) > 0
    terms = method.losses(batch)
    assert {k for k in terms if k.endswith("_loss")} == {"doc2vecc_loss"}
    assert torch.equal(method.total_loss(terms), terms["doc2vecc_loss"])


def test_an_augmentation_given_with_it_is_refused_in_one_line(task_folder, capsys):
    with pytest.raises(SystemExit) as exited:
        fit(task_folder / "run", "--model.init_args.augmentation=lit_docemb.augment.specs.WordNet")
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err, err
    assert err.strip().splitlines() == [err.strip()], err
    assert err.startswith("error: model.init_args.augmentation: Doc2VecCAlone draws no augmentation"), err


def test_the_stand_ins_bite_where_an_augmentation_is_drawn(task_folder):
    """The same piece with SimCLR (DECA's default augmentation, WordNet) reaches the stand-ins: the tests above would
    fail if Doc2VecCAlone drew one."""
    with pytest.raises(WordNetLoaded):
        fit(task_folder / "run", "--model.init_args.framework=lit_docemb.methods.deca_components.SimCLR")
