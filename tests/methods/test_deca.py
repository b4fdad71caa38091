"""DECA: Doc2VecC's model and loss, SimSiam's stop-gradient, the method's checks and vocabulary, and every
configs/deca config through the CLI (CPU fast_dev_run)."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import shlex
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numba
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
import yaml
from benchmark_scripts import benchmark_module
from conftest import _topic_texts
from corpus_files import labelled_docs
from journeys import write_text_gcn_release

from lit_docemb.augment import DocumentAugmenter, Vocabulary, words_of
from lit_docemb.augment.specs import PPDB, Antonym, BackTranslation, Uninformative, WordNet
from lit_docemb.augment.thesaurus import draws_of
from lit_docemb.commands import main
from lit_docemb.data.caches.field_cache import TokenizedFields
from lit_docemb.data.core.datamodule import documents_at
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.tokens import document_text
from lit_docemb.errors import ConfigError
from lit_docemb.methods import DECA
from lit_docemb.methods.deca_components import (
    Append,
    Doc2VecCAdamBackbone,
    Doc2VecCAlone,
    Doc2VecCBackbone,
    EncoderBackbone,
    SimCLR,
    SimSiam,
)
from lit_docemb.models import Doc2VecC, EncoderSpec
from lit_docemb.models.doc2vecc import (
    BatchWords, PackedWords, _CompiledSampling, _NegativeSampling, context_positions, word_examples,
)
from lit_docemb.models.doc2vecc_sgd import _sample_words, noise_table, train_documents
from lit_docemb.views.deca import (
    AppendedAugmentationCollator,
    Doc2VecCCollator,
    Doc2VecCPairCollator,
    IdReplacement,
    WordDocumentCollator,
    word_index,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs" / "deca").glob("*.yaml")
                 if yaml.safe_load(p.read_text())["model"]["class_path"] == "lit_docemb.methods.DECA")
"""DECA's own configs (the BERT-mlm / LF-mlm baselines beside them fit MaskedLanguageModelling:
tests/system/test_deca_encoder_baselines.py)."""
WORDNET = Path("/usr/share/wordnet")
needs_wordnet = pytest.mark.skipif(not (WORDNET / "data.noun").is_file(),
                                   reason="WordNet database missing: apt-get install -y wordnet-base")


def topic_documents(n: int | None = None) -> list[Document]:
    return [Document(name, sections=[Section("", text)]) for name, text in _topic_texts()[:n]]


def identity(text: str, seed) -> list[str]:
    return words_of(text)


def test_doc2vecc_embedding_is_the_mean_word_embedding():
    model = Doc2VecC(5, 4, torch.ones(5), corruption=0.5)
    words = torch.tensor([[1, 2, 3, 0], [4, 0, 0, 0], [0, 0, 0, 0]])
    U = model.word_embeddings.weight
    expected = torch.stack([U[[1, 2, 3]].mean(0), U[4], torch.zeros(4)])
    assert torch.allclose(model(words), expected)  # eq. 1; an empty document is the zero vector


def plain_chen_rule(U: np.ndarray, V: np.ndarray, document: list[int], alpha: float, noise_word: int) -> float:
    """``doc2vecc.c``'s CBOW step written out for window 1 (the context is the word before the target), every word
    in the document vector (sentence-sample 1) and one noise word: returns the summed loss, updates U and V."""
    weight, loss = 1.0 / len(document), 0.0
    for position, target in enumerate(document):
        context = document[position - 1:position] if position else []
        hidden = (sum(U[c] for c in context) + weight * sum(U[w] for w in document)) / (len(context) + 1)
        error = np.zeros_like(hidden)
        for word, label in ((target, 1.0), (noise_word, 0.0)):
            if label == 0.0 and word == target:
                continue
            score = float(hidden @ V[word])
            g = (label - 1 / (1 + np.exp(-score))) * alpha
            loss -= np.log(1 / (1 + np.exp(-score if label else score)))
            error += g * V[word]
            V[word] += g * hidden
        for c in context:
            U[c] += error / (len(context) + 1)
        for w in document:
            U[w] += error * weight / (len(context) + 1)
    return loss


def test_chen_rule_matches_a_plain_implementation():
    """The compiled rule against the loop above, where its draws are fixed: window 1 (the shrink is always 0),
    keep 1 (every word is in the document vector), a noise table of one word."""
    rng = np.random.default_rng(0)
    U = rng.normal(scale=0.3, size=(6, 4)).astype(np.float32)
    V = rng.normal(scale=0.3, size=(6, 4)).astype(np.float32)
    documents = [[1, 2, 3, 2], [4, 5, 1]]
    want_U, want_V = U.astype(np.float64), V.astype(np.float64)
    want_loss = sum(plain_chen_rule(want_U, want_V, d, 0.05, noise_word=3) for d in documents)
    words = np.array([1, 2, 3, 2, 4, 5, 1], dtype=np.int64)  # the two documents, packed
    loss, targets = train_documents(U, V, words, np.array([4, 3]), np.array([0, 4]), np.array([3], dtype=np.int32),
                                    1, 1, 1.0, 0.05, 0.0, 0.0, 7)
    assert targets == 7
    np.testing.assert_allclose(U, want_U, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(V, want_V, rtol=1e-5, atol=1e-6)
    assert loss == pytest.approx(want_loss, rel=1e-5)
    assert not np.allclose(U, rng.normal(scale=0.3, size=(6, 4)))  # (the rule did change U)


def test_chen_rule_is_seeded_and_scoring_changes_nothing():
    counts = torch.tensor([5.0, 3.0, 2.0, 2.0, 1.0])
    words = torch.tensor([[1, 2, 3, 4, 5, 1, 2], [2, 3, 1, 0, 0, 0, 0]])
    models = [Doc2VecC(5, 8, counts, window_size=3) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    before = {k: v.clone() for k, v in models[0].state_dict().items()}
    score = models[0].train_on(words, (0.0, 0.0), seed=3, learn=False)
    assert score > 0 and all(torch.equal(before[k], v) for k, v in models[0].state_dict().items())
    losses = [m.train_on(words, (0.2, 0.3), seed=3) for m in models]
    assert torch.equal(losses[0], losses[1])
    for (name, a), b in zip(models[0].state_dict().items(), models[1].state_dict().values()):
        assert torch.equal(a, b) and not torch.equal(a, before[name]), name
    assert torch.equal(models[0].word_embeddings.weight[0], torch.zeros(8))  # padding is never trained


@numba.njit(cache=False)
def _kept_positions(length: int, keep: float, most: int, draws: int, seed: int) -> np.ndarray:
    """(draws, length) 0/1: which positions of a chunk 0..length-1 :func:`_sample_words` keeps, draw by draw; every
    row checked to be increasing positions."""
    np.random.seed(seed)
    chunk, sampled = np.arange(length), np.zeros(most, dtype=np.int64)
    kept = np.zeros((draws, length), dtype=np.int64)
    for i in range(draws):
        n = _sample_words(chunk, keep, sampled)
        for j in range(n):
            if j > 0 and sampled[j] <= sampled[j - 1]:
                raise AssertionError("positions out of order")
            kept[i, sampled[j]] = 1
    return kept


@pytest.mark.parametrize("keep, most", [(0.3, 6), (0.1, 100), (0.9, 100)])
def test_document_words_drawn_by_their_gaps_are_the_programs_per_word_scan(keep, most):
    """The program keeps each word of the chunk with probability ``keep``, scanning from the start and stopping at
    ``most`` kept (MAX_SENTENCE_SAMPLE); drawing the gaps instead keeps position i with probability
    ``keep * P(Binomial(i, keep) < most)``, independently of the others while the cap is not reached."""
    from scipy.stats import binom

    length, draws = 40, 40_000
    kept = _kept_positions(length, keep, most, draws, 11)
    want = keep * binom.cdf(most - 1, np.arange(length), keep)
    np.testing.assert_allclose(kept.mean(0), want, atol=4 * np.sqrt(0.25 / draws))
    if most >= length:  # no cap: the words are independent draws, as the scan's
        both = (kept[:, 3] * kept[:, 4]).mean()
        assert both == pytest.approx(keep * keep, abs=4 * np.sqrt(0.25 / draws))
    np.testing.assert_array_equal(_kept_positions(length, 1.0, most, 3, 0).sum(1), min(length, most))


def test_noise_table_follows_the_three_quarter_power_and_skips_unseen_words():
    table = noise_table(np.array([16.0, 0.0, 1.0]), size=10_000)
    shares = np.bincount(table, minlength=4)[1:] / len(table)
    np.testing.assert_allclose(shares, [8 / 9, 0, 1 / 9], atol=1e-3)


def test_doc2vecc_loss_decreases_on_a_fixture_corpus():
    documents = topic_documents(40)
    vocabulary = Vocabulary.from_texts(d.text for d in documents)
    index = word_index(vocabulary, min_count=2, max_vocabulary=2000)
    counts = torch.tensor([vocabulary.counts[w] for w in index], dtype=torch.float64)
    torch.manual_seed(0)
    model = Doc2VecC(len(index), 32, counts, negative_samples=5, window_size=5)
    batch = Doc2VecCCollator(index, max_words=400, deterministic=True)(documents)
    losses = [model.train_on(batch.words, (epoch / 30, (epoch + 1) / 30), seed=epoch).item() for epoch in range(30)]
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < 0.8 * first, (first, last)


class CountedReads(list):
    """Documents whose batched reads are counted, item by item (an Arrow corpus's ``__getitems__``)."""

    def __init__(self, documents) -> None:
        super().__init__(documents)
        self.reads: list[str] = []

    def __getitems__(self, indices):
        self.reads += [self[i].id for i in indices]
        return [self[i] for i in indices]


def test_the_doc2vecc_collators_documents_are_read_once_and_kept_across_epochs(monkeypatch):
    """Plain Doc2VecC reads every document every epoch with a fixed index: the loaders keep what the collator reads
    of a document (its id and word ids), so the second epoch reads no document and splits no text, and its batch is
    the first's; beyond the kept size a document is read every epoch, as before."""
    import lit_docemb.views.deca as views
    from lit_docemb.data.core.kept_items import KeptItems

    index = {w: i for i, w in enumerate("a b c d e f".split(), 1)}
    documents = CountedReads([Document("x", sections=[Section("", "a b c d")]),
                              Document("y", sections=[Section("", "f e")]), Document("z", sections=[Section("", "a")])])
    split = []
    monkeypatch.setattr(views, "leading_words", lambda doc, n: split.append(doc.id) or views.words_of(doc.text)[:n])
    collate = Doc2VecCCollator(index, max_words=100, deterministic=False)
    kept = KeptItems(documents, collate.kept_item)
    first, second = collate(kept.__getitems__([0, 1, 2])), collate(kept.__getitems__([2, 1, 0]))
    assert first.words.padded().tolist() == [[1, 2, 3, 4], [6, 5, 0, 0]]
    assert second.words.padded().tolist() == [[6, 5, 0, 0], [1, 2, 3, 4]]
    assert second.skipped == first.skipped == 1 and split == documents.reads == ["x", "y", "z"]
    full = KeptItems(documents, collate.kept_item, max_size=4)  # x's 4 ids fill it
    once, again = (collate(full.__getitems__([0, 1, 2])).words.padded() for _ in range(2))
    assert torch.equal(once, again)
    assert documents.reads[3:] == ["x", "y", "z", "y", "z"] and split[3:] == ["x", "y", "z", "y", "z"]


def test_collated_words_follow_the_document():
    index = {w: i for i, w in enumerate("a b c d e f".split(), 1)}
    doc = Document("d", sections=[Section("", "a b c d e f")])
    batch = Doc2VecCPairCollator(index, identity, max_words=100, deterministic=True)(
        [doc, Document("short", sections=[Section("", "a")])])
    assert batch.skipped == 1 and batch.words.padded().tolist() == [[1, 2, 3, 4, 5, 6]]
    assert batch.augmented.padded().tolist() == [[1, 2, 3, 4, 5, 6]]
    assert WordDocumentCollator(index, 3)([doc]).words.padded().tolist() == [[1, 2, 3]]


def test_simsiam_passes_no_gradient_through_the_stop_gradient_branch():
    torch.manual_seed(0)
    model = DECA(Doc2VecCBackbone(embedding_dim=8), SimSiam())
    h, h_aug = torch.randn(6, 8, requires_grad=True), torch.randn(6, 8, requires_grad=True)
    model.contrastive(model.predictor(h), model.predictor(h_aug), h, h_aug)["simsiam_loss"].backward()
    # reference: the same loss with the targets as constants; a gradient through z would change h's gradient
    h2, h2_aug = h.detach().clone().requires_grad_(), h_aug.detach().clone().requires_grad_()
    model.zero_grad()
    model.contrastive(model.predictor(h2), model.predictor(h2_aug), h.detach(), h_aug.detach())[
        "simsiam_loss"].backward()
    assert torch.allclose(h.grad, h2.grad) and torch.allclose(h_aug.grad, h2_aug.grad)
    # and the gradient that would flow into the targets is not zero: the check above can fail
    z = h_aug.detach().clone().requires_grad_()
    (-F.cosine_similarity(model.predictor(h.detach()), z).mean()).backward()
    assert z.grad.abs().sum() > 0


def fake_trainer(documents: list[Document], world_size: int = 1, device: str = "cpu"):
    splits = SimpleNamespace(documents=None, train_set=documents, val_set=None, test_set=None, all_set=None,
                             fit_set=None)  # a DocumentSplits: the training split alone
    return SimpleNamespace(datamodule=splits, world_size=world_size,
                           strategy=SimpleNamespace(root_device=torch.device(device)), global_step=0,
                           estimated_stepping_batches=10)


@needs_wordnet
def test_simsiam_predictor_synchronises_batchnorm_across_gpus_only(tiny_encoder_dir):
    docs = topic_documents(20)
    backbone = EncoderBackbone(EncoderSpec(tiny_encoder_dir, pretrained=False, max_length=64))
    model = DECA(backbone, SimSiam(), WordNet())
    model._trainer = fake_trainer(docs, world_size=2, device="cuda")
    model.setup("fit")
    assert isinstance(model.predictor[1], torch.nn.SyncBatchNorm)  # DDP on GPUs: BatchNorm synchronised
    on_cpus = DECA(backbone, SimSiam(), WordNet())
    on_cpus._trainer = fake_trainer(docs, world_size=2)
    on_cpus.setup("fit")
    assert type(on_cpus.predictor[1]) is torch.nn.BatchNorm1d  # torch's SyncBatchNorm refuses CPU modules


@pytest.mark.parametrize("world_size, device, key", [(2, "cpu", "trainer.devices"), (1, "cuda", "trainer.accelerator")])
def test_doc2vecc_backbone_refuses_several_processes_and_gpus(world_size, device, key):
    """Chen's rule updates the backbone in place on the CPU: DDP replicas would drift apart silently."""
    model = DECA(Doc2VecCBackbone(min_word_count=2), Doc2VecCAlone())
    model._trainer = fake_trainer(topic_documents(20), world_size=world_size, device=device)
    with pytest.raises(ConfigError, match=f"^{key}: the Doc2VecC backbone"):
        model.setup("fit")


@needs_wordnet
def test_vocabulary_from_training_documents_survives_a_checkpoint():
    docs = topic_documents(20)
    model = DECA(Doc2VecCBackbone(min_word_count=2), SimSiam(), WordNet())
    model._trainer = fake_trainer(docs)
    model.setup("fit")
    assert model.backbone.word_embeddings.num_embeddings == len(model.index) + 1
    checkpoint = {"state_dict": model.state_dict()}
    model.on_save_checkpoint(checkpoint)
    restored = DECA(Doc2VecCBackbone(min_word_count=2), SimSiam(), WordNet())
    restored.on_load_checkpoint(checkpoint)
    restored.load_state_dict(checkpoint["state_dict"])
    batch = restored.collator("predict")(docs[:3])
    model.eval(), restored.eval()
    assert torch.equal(restored.embed(batch), model.embed(model.collator("predict")(docs[:3])))
    with pytest.raises(ValueError, match="not a DECA checkpoint"):
        restored.on_load_checkpoint({})


def test_arguments_that_would_be_ignored_cannot_be_written(tiny_encoder_dir):
    """Each component takes only its own options: an encoder has no window, SimSiam no temperature, SimCLR no
    predictor, WordNet no back-translation cache, Uninformative no dictionary constraint."""
    for component, option in [(EncoderBackbone, {"window_size": 4}), (Doc2VecCBackbone, {"max_length": 128}),
                              (SimCLR, {"predictor_hidden": 32}), (SimSiam, {"temperature": 0.5}),
                              (Append, {"weight": 0.5}), (Append, {"gather_across_devices": False}),
                              (WordNet, {"cache": "cache.sqlite"}), (Uninformative, {"dictionary_constraint": False})]:
        with pytest.raises(TypeError, match="argument"):
            component(**({"encoder": EncoderSpec(tiny_encoder_dir)} if component is EncoderBackbone else {}), **option)
    with pytest.raises(RuntimeError, match="no vocabulary"):
        DECA().collator("fit")
    model = DECA()  # the paper's defaults: Doc2VecC 100-d, window 10, SimCLR at tau 1.0, WordNet synonyms
    assert (model.backbone_spec.embedding_dim, model.backbone_spec.window_size) == (100, 10)
    assert model.contrastive.temperature == 1.0 and model.loss_weights == {"ntxent_loss": 1.0}
    assert isinstance(model.augmentation, WordNet) and model.augmentation.replacement_probability == 1.0


@pytest.mark.parametrize("arguments, key", [
    ({"framework": SimCLR(temperature=-1)}, "model.init_args.framework.init_args.temperature: must be > 0, got -1"),
    ({"framework": SimSiam(predictor_hidden=0)}, "model.init_args.framework.init_args.predictor_hidden: must be >= 1"),
    ({"framework": SimCLR(weight=-0.5)}, "model.init_args.framework.init_args.weight: must be >= 0"),
    ({"backbone": Doc2VecCBackbone(corruption=1.0)}, "model.init_args.backbone.init_args.corruption: must be in"),
    ({"backbone": Doc2VecCBackbone(min_word_count=0)}, "model.init_args.backbone.init_args.min_word_count: must be"),
    ({"augmentation": WordNet(replacement_probability=1.5)},
     "model.init_args.augmentation.init_args.replacement_probability: must be in"),
    ({"augmentation": WordNet(dictionary_constraint=False, replacement_min_count=2)},
     "model.init_args.augmentation.init_args.replacement_min_count: is the dictionary constraint's"),
    ({"augmentation": PPDB("p", replacement_min_count=0)},
     "model.init_args.augmentation.init_args.replacement_min_count: must be >= 1, got 0"),
    ({"augmentation": BackTranslation(["forward"], "cache.sqlite")},
     "model.init_args.augmentation.init_args.models: give the forward and the backward"),
    ({"augmentation": BackTranslation(["f", "b"], "cache.sqlite", max_length=0)},
     "model.init_args.augmentation.init_args.max_length: must be >= 1, got 0"),
    ({"augmentation": Uninformative(selection="lowest")},
     "model.init_args.augmentation.init_args.selection: must be 'rare' (the paper's) or 'tf_idf'"),
    ({"augmentation": Uninformative(rare_count=0)}, "model.init_args.augmentation.init_args.rare_count: must be >= 1"),
    ({"framework": "simclr"}, "model.init_args.framework: expected one of"),
    ({"backbone": Doc2VecCAdamBackbone(sample_words=0)}, "model.init_args.backbone.init_args.sample_words: must be"),
    ({"backbone": Doc2VecCAdamBackbone(dropout=1.0)}, "model.init_args.backbone.init_args.dropout: must be in"),
    ({"backbone": Doc2VecCAdamBackbone(examples_per_step=0)},
     "model.init_args.backbone.init_args.examples_per_step: must be >= 1"),
    ({"backbone": Doc2VecCAdamBackbone(), "scheduler": lambda optimizer: None},
     "model.init_args.scheduler: with Doc2VecCAdamBackbone"),
])
def test_out_of_range_values_are_config_errors_naming_the_full_key(arguments, key):
    with pytest.raises(ConfigError) as error:
        DECA(**arguments)
    assert str(error.value).startswith(key), str(error.value)


def write_labelled_tsv(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, docs in [("train", labelled_docs(40)), ("test", labelled_docs(12))]:
        (folder / f"{split}.tsv").write_text("".join(f"{d.label}\t{d.text}\n" for d in docs))
    return folder


@needs_wordnet
@pytest.mark.parametrize("config", CONFIGS)
def test_every_deca_config_runs_fast_dev_run(config, tiny_encoder_dir, tmp_path):
    folder = write_labelled_tsv(tmp_path / "set")
    args = ["fit", "--config", str(ROOT / config), f"--data.source={folder}", "--data.source_format=auto",
            "--data.column_names=[label,text]", "--data.classes=null", "--data.unlabelled_class=null",
            "--data.global_batch_size=8", "--data.num_workers=0", "--trainer.accelerator=cpu", "--trainer.devices=1",
            "--trainer.logger=false", "--trainer.fast_dev_run=2", f"--trainer.default_root_dir={tmp_path}"]
    init_args = yaml.safe_load((ROOT / config).read_text())["model"]["init_args"]
    augmentation = init_args["augmentation"]
    if augmentation.get("init_args", {}).get("dictionary_constraint", True):
        args += ["--model.init_args.augmentation.init_args.replacement_min_count=1"]
    if "_bt_" in config:
        args += [f"--model.init_args.backbone.init_args.encoder.name={tiny_encoder_dir}",
                 "--model.init_args.backbone.init_args.encoder.max_length=64"]
    else:
        args += ["--model.init_args.backbone.init_args.min_word_count=1"]
    if augmentation["class_path"].endswith(".PPDB"):
        ppdb = tmp_path / "ppdb"
        ppdb.write_text("[NN] ||| boat ||| ship ||| PPDB2.0Score=3 ||| 0-0 ||| Equivalence\n"
                        "[NN] ||| tide ||| wave ||| PPDB2.0Score=3 ||| 0-0 ||| Equivalence\n")
        args += [f"--model.init_args.augmentation.init_args.path={ppdb}"]
    cli = main(args)
    assert cli.trainer.global_step == 2
    evaluation = next(c for c in cli.trainer.callbacks if type(c).__name__ == "LabelledEmbeddingEvaluation")
    assert 0.0 <= evaluation.metrics["probe/error_rate"] <= 1.0 and 0.0 <= evaluation.metrics["cluster/nmi"] <= 1.0
    losses = {k for k in cli.trainer.callback_metrics if k.startswith("train/") and k.endswith("_loss")}
    contrastive = {SimCLR: {"train/ntxent_loss"}, SimSiam: {"train/simsiam_loss"}, Append: set()}
    assert losses - {"train/doc2vecc_loss"} == contrastive[type(cli.model.framework)]
    assert type(cli.model.framework).__name__ == init_args["framework"]["class_path"].rsplit(".", 1)[1]
    assert ("train/doc2vecc_loss" in cli.trainer.callback_metrics) == ("_dc_" in config)


@needs_wordnet
def test_predict_from_a_checkpoint_through_the_cli(tmp_path):
    folder = write_labelled_tsv(tmp_path / "set")
    args = ["--config", str(ROOT / "configs/deca/r8_dc_sc.yaml"), f"--data.source={folder}", "--data.global_batch_size=8",
            "--data.source_format=auto", "--data.column_names=[label,text]",
            "--data.num_workers=0", "--model.init_args.backbone.init_args.min_word_count=1",
            "--model.init_args.augmentation.init_args.replacement_min_count=1",
            "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.logger=false",
            "--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={tmp_path}"]
    fitted = main(["fit", *args, "--trainer.max_steps=2", "--trainer.limit_val_batches=1"])
    last = tmp_path / "checkpoints" / "last.ckpt"
    predicted = main(["predict", *args, f"--ckpt_path={last}"])  # a fresh model: vocabulary from the checkpoint
    assert predicted.model.index == fitted.model.index
    outputs = predicted.trainer.predict_loop.predictions
    embeddings = torch.cat([o["embeddings"] for o in outputs])
    data = fitted.datamodule  # in training its splits held the word cache's rows: the documents behind them
    assert isinstance(data.train_set[0], TokenizedFields) and isinstance(data.test_set[0], Document)
    documents = documents_at(data.all_set, range(len(data.all_set)), data.documents)
    assert all(isinstance(d, Document) for d in documents)
    fitted.model.eval()
    with torch.no_grad():
        expected = fitted.model.embed(fitted.model.collator("predict")(documents))
    assert [i for o in outputs for i in o["ids"]] == [d.id for d in documents]
    assert torch.allclose(embeddings, expected) and embeddings.abs().sum() > 0


def documented_doc2vecc_row(name: str) -> list[str]:
    """The argv (after ``python -m lit_docemb``) of docs/reproduce.md's fit of DECA's Doc2VecC row on ``name``."""
    lines = (ROOT / "docs" / "reproduce.md").read_text(encoding="utf-8").splitlines()
    line = next(line for line in lines if f"--run_dir runs/deca_{name}_doc2vecc" in line)
    return [str(ROOT / token) if token.startswith("configs/") else token for token in shlex.split(line)[3:]]


def test_documented_doc2vecc_row_fits_r8_without_an_augmentation(no_augmentation, tmp_path, monkeypatch, capsys):
    """DECA Tables 3-4's Doc2VecC row on R8, the command of docs/reproduce.md on text_gcn's files: it trains l_d
    alone and logs the error rate and NMI, with WordNet unreadable; without its ``augmentation null`` the set
    config's augmentation is refused in one line."""
    monkeypatch.chdir(tmp_path)
    argv = documented_doc2vecc_row("r8")
    assert "lit_docemb.methods.deca_components.Doc2VecCAlone" in argv
    assert argv[argv.index("--model.init_args.augmentation") + 1] == "null"
    source = write_text_gcn_release(tmp_path / "text_gcn", "R8")
    fixture = [f"--data.init_args.source={source}", f"--data.init_args.cache_dir={tmp_path / 'cache'}",
               "--data.init_args.global_batch_size=8", "--data.init_args.num_workers=0", "--trainer.logger=false",
               "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.max_steps=2",
               "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false",
               "--model.init_args.backbone.init_args.min_word_count=1"]
    cli = main(argv + fixture)
    assert cli.trainer.global_step == 2 and (tmp_path / "runs/deca_r8_doc2vecc/checkpoints/last.ckpt").is_file()
    assert isinstance(cli.model.framework, Doc2VecCAlone) and cli.model.augmentation is None
    assert {k for k in cli.trainer.callback_metrics if k.endswith("_loss")} >= {"train/doc2vecc_loss"}
    assert not {k for k in cli.trainer.callback_metrics if "ntxent" in k or "simsiam" in k}
    evaluation = next(c for c in cli.trainer.callbacks if type(c).__name__ == "LabelledEmbeddingEvaluation")
    assert 0.0 <= evaluation.metrics["probe/error_rate"] <= 1.0 and 0.0 <= evaluation.metrics["cluster/nmi"] <= 1.0
    capsys.readouterr()
    (tmp_path / "refused").mkdir()
    monkeypatch.chdir(tmp_path / "refused")  # a run folder of its own
    at = argv.index("--model.init_args.augmentation")
    with pytest.raises(SystemExit) as exited:
        main(argv[:at] + argv[at + 2:] + fixture)
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and err.splitlines() == [err], err
    assert err.startswith("error: model.init_args.augmentation: Doc2VecCAlone draws no augmentation"), err


@pytest.mark.parametrize("row", ["Doc2VecC", pytest.param("DC+SC", marks=needs_wordnet)])
def test_the_benchmarks_bookkeeping_changes_no_weight(row, tmp_path, monkeypatch):
    """benchmarks/reproduce_deca.py measures a trained row's CPU seconds without validation, wandb and a dataloader
    worker (its BOOKKEEPING_OFF): the fit is the one with validation after each epoch and a worker, to the bit, and
    so are the figures scored after it (a validation pass or a worker draws nothing from the training's
    generators)."""
    with benchmark_module("reproduce_deca") as bench:
        off, config = bench.BOOKKEEPING_OFF, ROOT / bench.SETS["r8"].config
        argv = ["fit", "--config", str(config), *bench.TRAINED[row]]
    assert {"--trainer.logger=false", "--trainer.limit_val_batches=0", "--data.init_args.num_workers=0"} == set(off)
    source = write_text_gcn_release(tmp_path / "text_gcn", "R8")
    fixture = [f"--data.init_args.source={source}", f"--data.init_args.cache_dir={tmp_path / 'cache'}",
               "--data.init_args.global_batch_size=8", "--trainer.logger=false", "--trainer.max_epochs=2",
               "--trainer.enable_progress_bar=false", "--model.init_args.backbone.init_args.min_word_count=1"]
    fits = []
    for name, bookkeeping in (("configured", ["--data.init_args.num_workers=1", "--trainer.limit_val_batches=1"]),
                              ("measured", off)):
        cli = main(argv + fixture + bookkeeping + [f"--run_dir={tmp_path / name}"])
        evaluation = next(c for c in cli.trainer.callbacks if type(c).__name__ == "LabelledEmbeddingEvaluation")
        fits.append((cli.trainer.global_step, cli.model.backbone.state_dict(), evaluation.metrics))
    (steps, weights, metrics), (steps_off, weights_off, metrics_off) = fits
    assert steps == steps_off == 8 and metrics == metrics_off
    assert weights.keys() == weights_off.keys() and all(torch.equal(weights[k], weights_off[k]) for k in weights)


def test_labelled_evaluation_scores_embeddings_and_refuses_bad_input():
    from lit_docemb.eval.labelled import LabelledEmbeddingEvaluation, evaluate_labelled

    class Marker(torch.nn.Module):  # embeds a document by whether it mentions the sea
        def collator(self, stage):
            return lambda docs: torch.tensor([[float("tide" in d.text), float("bug" in d.text)] for d in docs])

        def embed(self, batch):
            return batch

        def transfer_batch_to_device(self, batch, device, index):
            return batch

        device = torch.device("cpu")

    docs = labelled_docs(16)
    metrics = evaluate_labelled(Marker(), docs[:12], docs[12:], batch_size=5)
    assert metrics["probe/error_rate"] == 0.0 and metrics["cluster/nmi"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="must be labelled"):
        evaluate_labelled(Marker(), docs[:12], [Document("x", sections=[Section("", "tide")])])
    callback = LabelledEmbeddingEvaluation()
    trainer = SimpleNamespace(datamodule=SimpleNamespace(train_set=docs, val_set=None, test_set=None), loggers=[],
                              global_step=0)
    with pytest.raises(ValueError, match="labelled test split"):
        callback.on_train_end(trainer, Marker())


def reversed_words(text: str, seed) -> list[str]:
    return words_of(text)[::-1]


def test_appended_batch_is_the_document_then_its_augmentation():
    index = {w: i for i, w in enumerate("a b c d e f".split(), 1)}
    doc = Document("d", sections=[Section("", "a b c x d")])  # x: out of vocabulary
    batch = AppendedAugmentationCollator(index, reversed_words, max_words=100, deterministic=True)([doc])
    assert batch.words.padded().tolist() == [[1, 2, 3, 4, 4, 3, 2, 1]]  # Doc2VecC trains on the merged words


def appending_deca(**kwargs) -> DECA:
    model = DECA(Doc2VecCBackbone(min_word_count=1, corruption=0.0), Append(), WordNet(**kwargs))
    model._trainer = fake_trainer(topic_documents(20))
    model.setup("fit")
    return model


@needs_wordnet
def test_append_mode_trains_doc2vecc_on_each_document_followed_by_its_augmentation():
    model, docs = appending_deca(replacement_min_count=1), topic_documents(20)
    collate = model.collator("validate")  # deterministic: the augmentation seed is the document id
    batch, changed = collate(docs), 0
    for row, doc in zip(batch.words.padded().tolist(), docs):
        text = document_text(doc, True)
        original, augmented = (a.tolist() for a in collate.replacement(words_of(text), doc.id, collate.max_words))
        assert row[:len(original) + len(augmented)] == original + augmented
        assert not any(row[len(original) + len(augmented):])
        changed += augmented != original
    assert changed > len(docs) // 2  # the appended half is an augmentation, not a copy
    assert isinstance(model.collator("fit"), AppendedAugmentationCollator)


@needs_wordnet
def test_append_mode_loss_is_doc2vecc_alone_and_trains_every_merged_word():
    model = appending_deca()
    assert not hasattr(model, "contrastive") and not hasattr(model, "predictor")
    batch = model.collator("fit")(topic_documents(20)[:8])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    terms = model.train().losses(batch)  # Chen's rule runs in training: the backbone changes in place
    assert {k for k in terms if k.endswith("_loss")} == {"doc2vecc_loss"}
    assert torch.equal(model.total_loss(terms), terms["doc2vecc_loss"]) and not terms["doc2vecc_loss"].requires_grad
    moved = (model.backbone.word_embeddings.weight != before["backbone.word_embeddings.weight"]).any(1)
    # the merged words are trained (all but a few of a long document's last ones: doc2vecc.c's window is on the left
    # of the target and its document vector samples at most 100 words, so a word seen only past them is not)
    assert moved[batch.words.ids.unique()].float().mean() > 0.95
    assert not moved[0]
    for name in ("backbone.word_embeddings.weight", "backbone.output_embeddings.weight"):
        assert not torch.equal(before[name], model.state_dict()[name]), name


def test_invalid_ablation_combinations_are_errors(tiny_encoder_dir):
    """The two combinations across components that types cannot exclude: Append and a weighted contrastive loss
    with an encoder backbone."""
    with pytest.raises(ConfigError, match="^model.init_args.framework: Append .* encoder has no loss"):
        DECA(EncoderBackbone(EncoderSpec(tiny_encoder_dir)), Append())
    with pytest.raises(ConfigError, match="^model.init_args.framework.init_args.weight: .* contrastive loss alone"):
        DECA(EncoderBackbone(EncoderSpec(tiny_encoder_dir)), SimSiam(weight=0.5))
    model = DECA(Doc2VecCBackbone(), SimSiam(weight=0.5))  # lambda with Doc2VecC: eq. 6
    assert model.loss_weights == {"simsiam_loss": 0.5}
    with pytest.raises(ConfigError, match="^model.init_args.framework: Doc2VecCAlone .* not an encoder$"):
        DECA(EncoderBackbone(EncoderSpec(tiny_encoder_dir)), Doc2VecCAlone())
    with pytest.raises(ConfigError, match="^model.init_args.augmentation: Doc2VecCAlone draws no augmentation .* "
                                          "got Antonym: leave it unset"):
        DECA(Doc2VecCBackbone(), Doc2VecCAlone(), Antonym())
    assert DECA(Doc2VecCBackbone(), Doc2VecCAlone()).augmentation is None
    assert isinstance(DECA(Doc2VecCBackbone(), Append()).augmentation, WordNet)  # the default where one is drawn


class WordNetLoaded(Exception):
    """Raised by the test's stand-ins for the thesaurus: no augmentation may be built."""


@pytest.fixture
def no_augmentation(monkeypatch):
    """Building an augmenter or reading WordNet raises :class:`WordNetLoaded`."""
    def refuse(*args, **kwargs):
        raise WordNetLoaded

    monkeypatch.setattr("lit_docemb.augment.load_wordnet", refuse)
    monkeypatch.setattr("lit_docemb.augment.DocumentAugmenter.__init__", refuse)


def alone_deca(documents: list[Document], **backbone) -> DECA:
    model = DECA(Doc2VecCBackbone(min_word_count=1, **backbone), Doc2VecCAlone())
    model._trainer = fake_trainer(documents)
    model.setup("fit")
    return model


def test_doc2vecc_alone_batches_are_the_documents_own_words(no_augmentation):
    docs = topic_documents(20)
    model = alone_deca(docs, max_words=30)
    unknown = Document("unknown", sections=[Section("", "xyzzy plugh xyzzy")])  # no word of the vocabulary
    for stage in ("validate", "fit"):
        collate = model.collator(stage)
        assert type(collate) is Doc2VecCCollator
        batch = collate(docs[:5] + [unknown])
        assert batch.skipped == 1 and batch.doc_index.tolist() == collate(docs[:5]).doc_index.tolist()
        for row, doc in zip(batch.words.padded().tolist(), docs):
            ids = [model.index[w] for w in words_of(document_text(doc, True)) if w in model.index][:30]
            assert row == ids + [0] * (len(row) - len(ids))
    assert model.word_cache() is None  # no replacement table: nothing to cache


def test_doc2vecc_alone_trains_in_training_and_only_scores_otherwise(no_augmentation):
    """l_d is Chen's rule: a training batch changes U and V in place (the loss carries no gradient), a validation
    batch is scored from fixed draws and changes nothing; the backbone takes the spec's rule settings."""
    docs = topic_documents(20)
    model = alone_deca(docs, embedding_dim=8, window_size=2, negative_samples=3, corruption=0.5, learning_rate=0.1)
    rule = model.backbone
    assert (rule.window_size, rule.negative_samples, rule.corruption, rule.learning_rate) == (2, 3, 0.5, 0.1)
    batch = model.collator("validate")(docs[:6])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    scores = [model.eval().losses(batch)["doc2vecc_loss"] for _ in range(2)]
    assert torch.equal(scores[0], scores[1]) and scores[0] > 0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    terms = model.train().losses(batch)
    assert not terms["doc2vecc_loss"].requires_grad
    assert not torch.equal(before["backbone.word_embeddings.weight"], model.backbone.word_embeddings.weight)


def reference_draw(seed: str, position: int, stream: int) -> float:
    """word_draws' draw for one word in Python integers: splitmix64 of the seed's hash plus the word's counter."""
    mask = 2**64 - 1
    z = (int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(), "little")
         + (2 * position + stream + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return ((z ^ (z >> 31)) >> 11) / 2**53


def reference_augmentation(words: list[str], index, table, seed: str, probability: float) -> list[str]:
    """IdReplacement's draws written per word: two uniform draws (replace?, which candidate?) per word from the
    seed's stream, a candidate's words added one by one."""
    replace = [reference_draw(seed, j, 0) for j in range(len(words))]
    which = [reference_draw(seed, j, 1) for j in range(len(words))]
    out = []
    for word, u, r in zip(words, replace, which):
        candidates = table.get(word)
        out.extend(candidates[int(r * len(candidates))].split() if candidates and u < probability else [word])
    return out


def reference_doc2vecc_pairs(index, table, documents, draw: int, max_words: int, probability: float = 1.0):
    """Doc2VecCPairCollator's tensors written plainly (two tokenisations, a loop per word, a ``torch.tensor`` per
    row): (words, augmented)."""
    def ids(words):
        return [index[w] for w in words if w in index][:max_words]

    def pad(rows):
        out = torch.zeros(len(rows), max((len(r) for r in rows), default=1) or 1, dtype=torch.long)
        for i, row in enumerate(rows):
            out[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        return out

    kept = []
    for doc in documents:
        text, seed = document_text(doc, with_title=True)[:max_words * 12], f"{draw}:{doc.id}"
        words = ids(words_of(text))
        augmented = ids(reference_augmentation(words_of(text), index, table, seed, probability))
        if len(words) >= 2 and augmented:
            kept.append((words, augmented, seed))
    return pad([w for w, _, _ in kept]), pad([a for _, a, _ in kept])


@needs_wordnet
@pytest.mark.parametrize("name, probability", [("wordnet", 1.0), ("wordnet", 0.4), ("antonym", 1.0)])
def test_doc2vecc_collate_gives_the_batches_of_a_plain_per_word_implementation(name, probability):
    """The vectorised id-level draws (IdReplacement) against a word-by-word loop over the same generator;
    antonyms add two words ("not" + antonym), some of them outside a 300-word index (dropped on both sides)."""
    documents = topic_documents() + [Document("short", sections=[Section("", "the")])]
    vocabulary = Vocabulary.from_texts(document_text(d, True) for d in documents)
    augment = DocumentAugmenter(name, vocabulary, min_count=1, probability=probability, wordnet_dir=str(WORDNET))
    index = word_index(vocabulary, 1, 300)
    collate = Doc2VecCPairCollator(index, augment, max_words=60, deterministic=False)
    assert collate.replacement is not None
    for batch_seed in range(3):  # the training loader seeds torch per batch: the augmentation seeds follow it
        torch.manual_seed(batch_seed)
        batch = collate(documents)
        torch.manual_seed(batch_seed)
        draw = int(torch.randint(2**62, (1,)))
        words, augmented = reference_doc2vecc_pairs(index, augment.table, documents, draw, 60, probability)
        assert batch.skipped == 1 and torch.equal(batch.words.padded(), words)
        assert torch.equal(batch.augmented.padded(), augmented)
        assert not torch.equal(augmented, words)  # the augmentation replaced words


def test_id_replacement_draws_each_candidate_uniformly_with_the_given_probability():
    """Word "a" has 3 candidates (itself, "b", the two-word "c d"), "z" none; over 4,000 seeds "a" is resampled
    with probability 0.5, each candidate then about a third of the time; "z" and out-of-index "q" never change."""
    index = {w: i for i, w in enumerate("abcdz", 1)}
    replacement = IdReplacement(index, draws_of({"a": ("a", "b", "c d")}), probability=0.5)
    drawn = Counter()
    for seed in range(4000):
        ids, augmented = (a.tolist() for a in replacement(["z", "a", "q", "z"], str(seed), max_words=10))
        assert ids == [5, 1, 5]
        drawn[tuple(augmented)] += 1
        assert replacement(["z", "a", "q", "z"], str(seed), 10)[1].tolist() == augmented  # pure in its seed
    assert set(drawn) == {(5, 1, 5), (5, 2, 5), (5, 3, 4, 5)}
    kept = drawn[(5, 1, 5)]  # not resampled (≈ 2,000) or resampled to itself (≈ 667)
    assert abs(kept - 4000 * (0.5 + 0.5 / 3)) < 150
    assert all(abs(drawn[k] - 4000 * 0.5 / 3) < 120 for k in [(5, 2, 5), (5, 3, 4, 5)])
    assert replacement(["a", "b", "a"], "s", max_words=2)[0].tolist() == [1, 2]  # cut after dropping, as ids() does


@needs_wordnet
def test_without_the_dictionary_constraint_an_out_of_corpus_synonym_is_a_word_not_a_deletion():
    """Table 5's "-Dictionary" row: a replacement that the corpus never saw gets a Doc2VecC word of its own (count 0,
    never a negative sample), so the augmented document keeps as many words as the original."""
    docs = [Document(f"d{i}", sections=[Section("", "the car is here and the dog is there")]) for i in range(6)]
    model = DECA(Doc2VecCBackbone(min_word_count=1, corruption=0.0), Append(), WordNet(dictionary_constraint=False))
    model._trainer = fake_trainer(docs)
    model.setup("fit")
    corpus_words = set(Vocabulary.from_texts(["the car is here and the dog is there"]).counts)
    assert {"automobile", "motorcar", "domestic", "andiron"} <= set(model.index)  # car's and dog's synonyms' words
    assert all(model.index[w] <= len(corpus_words) for w in corpus_words)  # the corpus's words come first
    noise, known = model.backbone.noise, len(corpus_words)
    assert set(np.unique(noise).tolist()) == set(range(1, known + 1))  # only corpus words are ever noise
    collate = model.collator("validate")
    lengths, replaced = set(), 0
    for doc in docs:
        original, augmented = collate.replacement(words_of(document_text(doc, True)), doc.id, collate.max_words)
        lengths.add(len(augmented) - len(original) >= 0)
        replaced += sum(i > len(corpus_words) for i in augmented.tolist())  # a thesaurus word, kept
    assert lengths == {True} and replaced > 0
    constrained = DECA(Doc2VecCBackbone(min_word_count=1), Append(), WordNet())
    constrained._trainer = fake_trainer(docs)
    constrained.setup("fit")
    assert set(constrained.index) == corpus_words


def test_encoder_views_are_both_words_without_punctuation(tiny_encoder_dir):
    """The two BERT views differ by the augmentation alone: the document's view is its words as the augmentation's
    is (lower case, no punctuation), not the raw text."""
    from lit_docemb.models import tokenizer_and_encoder
    from lit_docemb.views.deca import AugmentedTextCollator

    tokenizer, _ = tokenizer_and_encoder(tiny_encoder_dir, 32, "max_length", "encoder")
    doc = Document("d", sections=[Section("", "The Car, here! And (the) dog.")])
    batch = AugmentedTextCollator(tokenizer, identity, 32, deterministic=True)([doc])
    assert torch.equal(batch.view_a.input_ids, batch.view_b.input_ids)  # identity augmentation: identical views
    text = tokenizer.decode(batch.view_a.input_ids[0], skip_special_tokens=True)
    assert not any(mark in text for mark in ",!()."), text


def same_field(left, right) -> bool:
    """Two batches' values of one field: tensors (packed words field by field) equal, other values ==."""
    if isinstance(left, PackedWords):
        return all(torch.equal(a, b) for a, b in zip(left, right))
    return torch.equal(left, right) if isinstance(left, torch.Tensor) else left == right


@needs_wordnet
@pytest.mark.parametrize("augmentation", ["wordnet", "antonym", "ppdb", "append"])
def test_views_from_cached_word_types_are_the_views_from_text(augmentation, tmp_path):
    """Issue 23 item 1: with a thesaurus augmentation the Doc2VecC collators read each document's word types,
    split once per corpus and vocabulary into the Arrow cache: the same batches (ids, augmentations, CBOW targets
    and windows) as from the text for the same seeds, in training and validation; a document the cache lacks is
    read from its text."""
    from corpus_files import write_ppdb

    from lit_docemb.augment.specs import Antonym
    from lit_docemb.data.caches.field_cache import FieldRows
    from lit_docemb.views.deca import WordTypes

    docs = topic_documents(20) + [Document("film", sections=[Section("", "A big film, a big car. Not good!")])]
    spec = {"wordnet": WordNet(replacement_min_count=1), "antonym": Antonym(replacement_min_count=1),
            "ppdb": PPDB(str(write_ppdb(tmp_path / "ppdb.txt")), replacement_min_count=1),
            "append": WordNet(replacement_min_count=1)}[augmentation]
    model = DECA(Doc2VecCBackbone(min_word_count=1, max_words=60), Append() if augmentation == "append" else None,
                 spec, token_cache_dir=str(tmp_path / "words"))
    model._trainer = fake_trainer(docs)
    model._trainer.datamodule.documents = docs[:-1]
    model.setup("fit")
    assert model.word_rows is None  # opened by the first collator, after a checkpoint's vocabulary is restored
    for stage in ("fit", "validate"):
        cached, text = model.collator(stage), model._pair_collator(stage)
        assert isinstance(model.word_rows, FieldRows) and model.word_rows.get(docs[-1].id) is None  # left to the text
        assert len(model.word_rows.rows) == len(docs) - 1
        assert cached.cached is model.word_rows and text.cached is None
        for seed in range(4):
            batches = []
            for collate in (cached, text):
                torch.manual_seed(seed)
                batches.append(collate(docs))
            for field in dataclasses.fields(batches[0]):
                left, right = (getattr(b, field.name) for b in batches)
                assert same_field(left, right), field.name
    assert model.collator("predict").__class__ is WordDocumentCollator
    rows = model.word_cache().open(docs[:-1])  # what a DataModule's splits hold in training (model.token_cache)
    kept = [model.collator("fit").kept_item(item) for item in [*rows, docs[-1]]]  # what later epochs read
    assert [k.id for k in kept] == [d.id for d in docs]
    for seed in range(2):
        batches = []
        for items in ([*rows, docs[-1]], docs, kept):  # a row, or a document (a test split's) read through the cache
            torch.manual_seed(seed)
            batches.append(model.collator("fit")(items))
        for field, other in itertools.product(dataclasses.fields(batches[0]), batches[1:]):
            left, right = getattr(batches[0], field.name), getattr(other, field.name)
            assert same_field(left, right), field.name
    with pytest.raises(ValueError, match="thesaurus augmentation"):
        AppendedAugmentationCollator({"a": 1}, reversed_words, 10, True, cached=model.word_rows)
    assert WordTypes(cached.replacement, 60).key() != WordTypes(cached.replacement, 61).key()


@needs_wordnet
def test_negated_antonyms_keep_their_not_on_a_corpus_without_it():
    """§3.3: "strong" becomes "not weak", not "weak": the negation is in the Doc2VecC vocabulary even where the corpus
    (text_gcn's cleaned ones: no stop words) never has it."""
    docs = [Document(f"d{i}", sections=[Section("", "the strong engine and the weak motor run")]) for i in range(12)]
    model = DECA(Doc2VecCBackbone(min_word_count=1), SimCLR(), Antonym())
    model._trainer = fake_trainer(docs)
    model.setup("fit")
    assert "not" in model.index
    batch = model.collator("fit")(docs)
    pairs = {tuple(row[i:i + 2]) for row in batch.augmented.padded().tolist() for i in range(len(row) - 1)}
    assert (model.index["not"], model.index["weak"]) in pairs  # "strong" → "not weak", both words kept


@needs_wordnet
def test_replacements_are_words_of_the_doc2vecc_vocabulary():
    """§4.4: only vocabulary words are replacement candidates. A synonym seen 6 times is not in a vocabulary of
    words seen 10 times, so it is no candidate (it had no id and became a deletion); asking for fewer is refused."""
    text = " ".join(["car"] * 4 + ["automobile"] * 2 + ["machine"] * 4 + ["road"] * 4)  # x 3 documents
    docs = [Document(f"d{i}", sections=[Section("", text)]) for i in range(3)]
    model = DECA(Doc2VecCBackbone(min_word_count=10), SimCLR(), WordNet())
    model._trainer = fake_trainer(docs)
    model.setup("fit")
    table = model.augmenter().table
    assert "automobile" not in model.index and table["car"] and "automobile" not in table["car"]
    assert all(w in model.index for word, candidates in table.items() for c in candidates if c != word
               for w in c.split())  # every replacement (a word's own entry keeps the word itself)
    with pytest.raises(ConfigError, match="^model.init_args.augmentation.init_args.replacement_min_count: 5 admits"):
        DECA(Doc2VecCBackbone(min_word_count=10), SimCLR(), WordNet(replacement_min_count=5))


# --- Algorithm 1 as written: Doc2VecC and the contrastive term trained by one optimizer ---------------------------

def test_the_context_of_a_word_level_example_is_the_programs_window():
    """Each example's context is ``t - window + b .. t - b`` without ``t`` for one ``b`` in ``[0, window)``, the
    positions before the document's start left out (doc2vecc.c's window, as Chen's rule draws it)."""
    window, positions = 4, torch.arange(12).repeat(50)
    context, mask = context_positions(positions, window, torch.Generator().manual_seed(0))
    shrinks = set()
    for t, row, keep in zip(positions.tolist(), context.tolist(), mask.tolist()):
        taken = {c for c, k in zip(row, keep) if k}
        fitting = [b for b in range(window)
                   if taken == {t - window + a for a in range(b, window + 1 - b) if a != window and t - window + a >= 0}]
        assert fitting, (t, sorted(taken))
        shrinks.update(fitting)
    assert shrinks == set(range(window))


def test_word_level_example_loss_is_differentiable_and_starts_at_chance():
    """At the start (V = 0) every score is 0: the loss of an example is log 2 for the target and for each noise
    word that is not the target; the gradient reaches V's rows of the targets and U's of the context."""
    torch.manual_seed(0)
    model = Doc2VecC(6, 4, torch.ones(6), negative_samples=3, window_size=2)
    words = torch.tensor([[1, 2, 3, 4, 0], [5, 6, 1, 0, 0]])
    examples = word_examples(words)
    assert examples.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0], [1, 1], [1, 2]]
    losses = model.example_loss(words, examples, sample_words=2, dropout=0.0,
                                generator=torch.Generator().manual_seed(1))
    assert losses.shape == (7,) and torch.all(losses <= 4 * np.log(2) + 1e-6) and torch.all(losses >= np.log(2))
    losses.sum().backward()
    assert model.output_embeddings.weight.grad[1:].abs().sum() > 0  # V: the targets' and noise words' rows
    assert model.word_embeddings.weight.grad[0].abs().sum() == 0  # padding never trains


def plain_example_loss(model: Doc2VecC, words, examples, sample_words: int, dropout: float, generator):
    """Eq. 2-3 on word-level examples written the plain way (gathered embeddings, broadcast products, autograd),
    drawing what ``example_loss`` draws in the same order: the oracle of its weighted bag and its own backward."""
    documents, positions = examples[:, 0], examples[:, 1]
    lengths = (words != 0).sum(1)[documents]
    context, mask = context_positions(positions, model.window_size, generator)
    drawn = (torch.rand(len(examples), sample_words, generator=generator) * lengths[:, None]).long()
    noise = model.noise_ids[torch.randint(len(model.noise_ids), (len(examples), model.negative_samples),
                                          generator=generator)].long()
    U, V = model.word_embeddings, model.output_embeddings
    hidden = (U(words[documents[:, None], context] * mask).sum(1) + U(words[documents[:, None], drawn]).mean(1)) / (
        mask.sum(1, keepdim=True) + 1)
    if model.training and dropout > 0:
        hidden = hidden * (torch.rand(hidden.shape, dtype=hidden.dtype) >= dropout) / (1 - dropout)
    targets = words[documents, positions]
    positive = F.logsigmoid((V(targets) * hidden).sum(-1))
    negative = F.logsigmoid(-(V(noise) * hidden[:, None]).sum(-1)) * (noise != targets[:, None])
    return -(positive + negative.sum(-1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["compiled-kernels", "torch-ops"])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_word_level_example_loss_and_its_gradient_equal_the_plain_formula(dropout, dtype):
    """``example_loss`` (one weighted bag of words, negative sampling with its own backward; compiled kernels in
    float32 on the CPU, torch's ops otherwise) gives the plain formula's losses and gradients of U and V on the same
    draws, dropout included; padding never trains."""
    generator = torch.Generator().manual_seed(0)
    words = torch.randint(1, 30, (12, 20), generator=generator)
    words[torch.arange(20)[None] >= torch.randint(1, 21, (12, 1), generator=generator)] = 0
    model = Doc2VecC(29, 8, torch.arange(1, 30).float(), negative_samples=4, window_size=3).to(dtype)
    nn.init.normal_(model.output_embeddings.weight, std=0.5)
    examples = word_examples(words)
    found = []
    for loss in (Doc2VecC.example_loss, plain_example_loss):
        model.zero_grad()
        torch.manual_seed(7)
        losses = loss(model, words, examples, 3, dropout, torch.Generator().manual_seed(1))
        losses.sum().backward()
        found.append((losses.detach(), model.word_embeddings.weight.grad.clone(),
                      model.output_embeddings.weight.grad.clone()))
    for ours, plain in zip(*found):
        torch.testing.assert_close(ours, plain)
    assert found[0][1][0].abs().sum() == 0 and found[0][2][0].abs().sum() == 0
    assert found[0][1][1:].abs().sum() > 0 and found[0][2][1:].abs().sum() > 0


def test_negative_samplings_own_backward_is_the_gradient():
    """gradcheck in float64: the hand-written backward of eq. 3's negative sampling (hidden vectors and V), with a
    noise word equal to its target (left out of the loss) among the draws."""
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(6, 5, dtype=torch.float64, generator=generator, requires_grad=True)
    weight = torch.randn(9, 5, dtype=torch.float64, generator=generator, requires_grad=True)
    targets = torch.tensor([1, 2, 3, 4, 5, 2])
    noise = torch.randint(1, 9, (6, 3), generator=generator)
    noise[0, 1] = 1
    assert torch.autograd.gradcheck(lambda h, w: _NegativeSampling.apply(h, w, targets, noise), (hidden, weight))


def test_compiled_negative_sampling_equals_torchs_with_its_gradient():
    """The CPU float32 kernels of negative sampling give the losses and the gradients of hidden vectors and V that
    torch's ops give, a noise word equal to its target left out of both, scores far in the tails included."""
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(7, 5, generator=generator)
    hidden[0] *= 40.0  # |scores| beyond 30: the losses' and slopes' tails
    weight = torch.randn(9, 5, generator=generator)
    targets = torch.tensor([1, 2, 3, 4, 5, 2, 8])
    noise = torch.randint(1, 9, (7, 3), generator=generator)
    noise[0, 1], noise[5, 0] = 1, 2
    found = []
    for apply in (lambda h, w: _NegativeSampling.apply(h, w, targets, noise),
                  lambda h, w: _CompiledSampling.apply(h, w, torch.cat([targets[:, None], noise], 1))):
        h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
        losses = apply(h, w)
        (losses * torch.arange(1.0, 8.0)).sum().backward()
        found.append((losses.detach(), h.grad, w.grad))
    for compiled, plain in zip(found[1], found[0]):
        torch.testing.assert_close(compiled, plain)
    assert found[1][0][0] > 30  # a tail's loss, finite


def test_packed_words_are_the_padded_blocks_words_document_by_document():
    """A Doc2VecC batch's words travel packed (no (B, T) block): packing a 0-padded block, packing the rows
    themselves and unpacking agree, a word's (document, position) is its entry of the block (``word_examples``), and
    a document followed by its augmentation is the two rows one after the other (an empty document included)."""
    rows = [[3, 1, 4, 1], [], [5], [9, 2, 6]]
    block = torch.tensor([row + [0] * (4 - len(row)) for row in rows])
    packed = PackedWords.from_rows(rows)
    assert [torch.equal(a, b) for a, b in zip(PackedWords.of(block), packed)] == [True] * 3
    assert packed.lengths.tolist() == [4, 0, 1, 3] and packed.starts.tolist() == [0, 4, 4, 5]
    assert torch.equal(packed.padded(), block) and PackedWords.of(packed) is packed
    assert torch.equal(word_examples(packed), torch.nonzero(block))
    assert torch.equal(word_examples(block), torch.nonzero(block))
    others = [[7], [8, 8], [], [1, 2]]
    merged = packed.followed_by(PackedWords.from_rows(others))
    assert merged.padded().tolist() == [[3, 1, 4, 1, 7], [8, 8, 0, 0, 0], [5, 0, 0, 0, 0], [9, 2, 6, 1, 2]]
    assert PackedWords.from_rows([]).padded().shape == (0, 1)


def test_batch_words_give_embedding_bags_means_and_gradient_for_any_documents_of_the_batch():
    """Algorithm 1's steps read subsets of one batch: BatchWords packs it once, and its means and their gradient
    for chosen documents (empty and repeated words among them) are eq. 1's on ``words[documents]``."""
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([0, 5, 1, 8, 3, 8, 2])
    words = torch.zeros(7, 8, dtype=torch.long)
    for row, length in enumerate(lengths.tolist()):
        words[row, :length] = torch.randint(1, 4, (length,), generator=generator)  # words repeat within documents
    documents = torch.tensor([5, 0, 3, 1])
    chosen = PackedWords.of(words[documents])
    assert [torch.equal(a, b) for a, b in zip(PackedWords.of(words).select(documents), chosen)] == [True] * 3
    U = torch.randn(4, 6, generator=generator, requires_grad=True)
    upstream = torch.randn(4, 6, generator=generator)
    means = BatchWords(words, 4).means(U, documents)
    (means * upstream).sum().backward()
    subset_gradient, U.grad = U.grad, None
    reference = F.embedding_bag(chosen.ids, U, chosen.starts, mode="mean")
    (reference * upstream).sum().backward()
    assert torch.equal(means, reference) and means[1].abs().sum() == 0  # the empty document's mean is zeros
    torch.testing.assert_close(subset_gradient, U.grad)


def adam_deca(documents: list[Document], framework=None, **backbone) -> DECA:
    model = DECA(Doc2VecCAdamBackbone(min_word_count=1, **backbone), framework or Doc2VecCAlone())
    model._trainer = fake_trainer(documents)
    model.setup("fit")
    return model


def test_the_adam_backbone_learns_doc2vecc_on_a_fixture_corpus(no_augmentation):
    """l_d by the optimizer (no Chen SGD): the loss carries a gradient, and Adam at the paper's 1e-3 lowers it."""
    docs = topic_documents(40)
    model = adam_deca(docs, embedding_dim=16, window_size=3, dropout=0.0)
    batch = model.collator("validate")(docs)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    start = model.eval().losses(batch)["doc2vecc_loss"].item()
    model.train()
    for _ in range(60):
        optimizer.zero_grad()
        loss = model.losses(batch, word_examples(batch.words))["doc2vecc_loss"]
        assert loss.requires_grad
        loss.backward()
        optimizer.step()
    assert model.eval().losses(batch)["doc2vecc_loss"].item() < 0.8 * start


@needs_wordnet
def test_the_adam_backbone_takes_an_optimizer_step_per_examples_each_with_the_contrastive_term(tmp_path, monkeypatch,
                                                                                             caplog):
    """Through ``fit``: every word of each batch of documents is a target once, ``examples_per_step`` a step, so
    an epoch's optimizer steps follow its words, and each step trains the contrastive term (counted in the log)."""
    monkeypatch.chdir(tmp_path)
    source = write_text_gcn_release(tmp_path / "text_gcn", "R8")
    argv = ["fit", "--config", str(ROOT / "configs/deca/r8_dc_sc.yaml"), "--run_dir", str(tmp_path / "run"),
            "--model.init_args.backbone=lit_docemb.methods.deca_components.Doc2VecCAdamBackbone",
            "--model.init_args.backbone.init_args.examples_per_step=50",
            "--model.init_args.backbone.init_args.min_word_count=1",
            f"--data.init_args.source={source}", f"--data.init_args.cache_dir={tmp_path / 'cache'}",
            "--data.init_args.global_batch_size=8", "--data.init_args.num_workers=0", "--trainer.logger=false",
            "--trainer.max_epochs=1", "--trainer.enable_progress_bar=false"]
    words = []
    collate = DECA.collator

    def counting(self, stage):
        collator = collate(self, stage)
        if stage != "fit":
            return collator

        def counted(items):
            batch = collator(items)
            words.append(int(batch.words.lengths.sum()))
            return batch
        return counted

    monkeypatch.setattr(DECA, "collator", counting)
    cli = main(argv)
    assert words and cli.trainer.global_step == sum(-(-n // 50) for n in words) > len(words)
    assert cli.trainer.callback_metrics["train/contrastive_steps"] == cli.trainer.global_step
    assert cli.trainer.callback_metrics["train/ntxent_loss"] > 0
    steps = cli.trainer.global_step
    assert f"DECA: {steps} optimizer steps, {steps} of them on the contrastive term (l_d by the optimizer" in caplog.text
