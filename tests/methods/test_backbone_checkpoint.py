"""The fine-tuning wrappers (DocumentClassifier, DenseRetrieval) start from a checkpoint (``checkpoint=``) as a
command restores a run: the backbone method's own ``on_load_checkpoint`` first (DECA's and CTPE's vocabularies,
which size their tables), then its weights; from the pretraining run's checkpoint or from a wrapper's, which
carries its backbone's vocabulary."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from corpus_files import WORDS, clustered_documents, topic_texts

from lit_docemb.augment import Vocabulary
from lit_docemb.errors import ConfigError
from lit_docemb.methods import CTPE, DECA, DenseRetrieval, DocumentClassifier
from lit_docemb.methods.checkpoints import restore_method
from lit_docemb.methods.deca_components import Doc2VecCAlone, Doc2VecCBackbone
from lit_docemb.models.ctpe import WordEmbeddings


def deca(trained: bool) -> DECA:
    """A DECA on Doc2VecC as its config builds it (no word table yet), or as its fit left it (a table sized by the
    corpus's vocabulary)."""
    method = DECA(Doc2VecCBackbone(embedding_dim=8, min_word_count=1), Doc2VecCAlone())
    if trained:
        method._set_vocabulary(Vocabulary.from_texts([" ".join(WORDS), *topic_texts(8)]))
    return method


def ctpe(trained: bool) -> CTPE:
    """A CTPE on corpus word vectors as its config builds it (no encoder yet), or as its fit left it."""
    method = CTPE(WordEmbeddings(init="random", dim=8, min_count=1), n_filters=4, max_length=16)
    if trained:
        method.prepare(clustered_documents())
    return method


def vocabulary(method) -> list[str]:
    return list(method.index) if isinstance(method, DECA) else method.tokenizer.words


WRAPPERS = {"classifier": lambda backbone, **kw: DocumentClassifier(backbone, labels=["code", "sea"], **kw),
            "retrieval": lambda backbone, **kw: DenseRetrieval(backbone, **kw)}


def save(method: L.LightningModule, path: Path) -> str:
    """``method``'s checkpoint as Lightning writes it: its weights and what its ``on_save_checkpoint`` adds."""
    checkpoint = {"state_dict": method.state_dict(), "pytorch-lightning_version": L.__version__}
    method.on_save_checkpoint(checkpoint)
    torch.save(checkpoint, path)
    return str(path)


def assert_restored(backbone, saved) -> None:
    assert vocabulary(backbone) == vocabulary(saved) and len(vocabulary(saved)) > 10
    expected = saved.state_dict()
    assert backbone.state_dict().keys() == expected.keys()
    for name, weight in backbone.state_dict().items():
        assert torch.equal(weight, expected[name]), name


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("method", [deca, ctpe], ids=["deca", "ctpe"])
def test_a_wrapper_starts_from_the_pretraining_checkpoint_with_its_vocabulary(method, wrapper, tmp_path):
    """Weights alone loaded nothing: DECA on Doc2VecC and CTPE on word vectors have no weights before their
    vocabulary builds them, so every saved weight was ignored as extra without a word; the classifier then stopped
    at its probe embedding (RuntimeError: DECA's Doc2VecC has no vocabulary), the retrieval wrapper had no encoder."""
    torch.manual_seed(0)
    pretrained = method(trained=True)
    model = WRAPPERS[wrapper](method(trained=False), checkpoint=save(pretrained, tmp_path / "pre.ckpt"))
    assert_restored(model.backbone, pretrained)


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("method", [deca, ctpe], ids=["deca", "ctpe"])
def test_a_wrappers_checkpoint_carries_its_backbones_vocabulary(method, wrapper, tmp_path):
    """Phase 2 of a fine-tuning (or a command restoring a wrapper's run) starts from phase 1's checkpoint."""
    torch.manual_seed(0)
    phase1 = WRAPPERS[wrapper](method(trained=False), checkpoint=save(method(trained=True), tmp_path / "pre.ckpt"))
    path = save(phase1, tmp_path / "phase1.ckpt")
    assert_restored(WRAPPERS[wrapper](method(trained=False), checkpoint=path).backbone, phase1.backbone)


@pytest.mark.parametrize("method", [deca, ctpe], ids=["deca", "ctpe"])
def test_a_command_restores_a_wrappers_run_with_its_backbones_vocabulary(method, tmp_path):
    """A command restores a fine-tuning run through the wrapper's own hook, which hands the backbone its state."""
    torch.manual_seed(0)
    phase1 = DenseRetrieval(method(trained=False), checkpoint=save(method(trained=True), tmp_path / "pre.ckpt"))
    run = DenseRetrieval(method(trained=False))  # the run's config with checkpoint: null
    restore_method(run, save(phase1, tmp_path / "phase1.ckpt"))
    assert_restored(run.backbone, phase1.backbone)


@pytest.mark.parametrize("method", [deca, ctpe], ids=["deca", "ctpe"])
def test_a_checkpoint_without_the_vocabulary_is_one_line_naming_the_key(method, tmp_path):
    """A wrapper's checkpoint saved before wrappers carried their backbone's vocabulary: its weights alone cannot
    rebuild the backbone."""
    torch.manual_seed(0)
    phase1 = DenseRetrieval(method(trained=False), checkpoint=save(method(trained=True), tmp_path / "pre.ckpt"))
    torch.save({"state_dict": phase1.state_dict()}, tmp_path / "old.ckpt")
    with pytest.raises(ConfigError, match=r"^model\.init_args\.checkpoint: .*old\.ckpt.*vocabulary") as raised:
        DenseRetrieval(method(trained=False), checkpoint=str(tmp_path / "old.ckpt"))
    assert "\n" not in str(raised.value)


def test_a_backbone_built_from_its_config_leaves_nothing_of_it_in_the_wrappers_checkpoint(tmp_path):
    """A wrapper never runs its backbone's setup, where a method builds its vocabulary: DECA's own hook, which
    saves that vocabulary, is not called on one that has none."""
    checkpoint = {"state_dict": {}}
    DenseRetrieval(deca(trained=False)).on_save_checkpoint(checkpoint)
    assert checkpoint == {"state_dict": {}, "backbone_entries": []}  # and a restore skips DECA's hook


def test_the_backbones_refusal_names_the_wrappers_key(tmp_path):
    """DECA's hook names the commands' --ckpt_path; under a wrapper the checkpoint is model.init_args.checkpoint."""
    path = save(ctpe(trained=True), tmp_path / "ctpe.ckpt")
    with pytest.raises(ConfigError, match=r"^model\.init_args\.checkpoint: .*ctpe\.ckpt: not a DECA checkpoint"):
        DenseRetrieval(deca(trained=False), checkpoint=path)
