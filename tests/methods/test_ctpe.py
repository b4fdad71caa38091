"""CTPE: preprocessing, CNN encoder, eq. 2 similarity, margin loss values, collation through the method, checkpoints.
Its views alone (splits, partner sampling, cached field ids) are tests/views/test_ctpe_views.py."""

from __future__ import annotations

import math

import pytest
import torch
from corpus_files import clustered_documents

from lit_docemb.data.core.batches import CoupledPairBatch
from lit_docemb.data.core.document import Document, Section
from lit_docemb.losses import CoupledMarginLoss
from lit_docemb.methods import CTPE, TransformerTokens, WordEmbeddings
from lit_docemb.models.ctpe import ConvTextEncoder, coupled_pair_similarity
from lit_docemb.models.ctpe_tokenizers import preprocess_words
from lit_docemb.views.ctpe import split_ids

def test_paper_preprocessing():
    assert preprocess_words("<b>Deep</b> NETS &amp; 42 layers, x1-style (v2.0)") == \
        ["deep", "nets", "layers", "x1", "style", "v2"]


def test_conv_encoder_pools_only_real_windows():
    torch.manual_seed(0)
    cnn = ConvTextEncoder(input_dim=3, n_filters=4, widths=[1, 2, 3, 5])
    text = torch.randn(1, 4, 3)  # 4 tokens: shorter than the width-5 kernel
    alone = cnn(text, torch.ones(1, 4))
    padded = cnn(torch.cat([text, torch.randn(1, 6, 3)], 1), torch.tensor([[1.0] * 4 + [0.0] * 6]))
    assert alone.shape == (1, 16)
    assert torch.allclose(alone, padded, atol=1e-6)  # padding values never matter
    # width 2 by hand: max over the 3 windows of ReLU(W x + b)
    conv = cnn.convs[1]
    windows = torch.stack([torch.einsum("oiw,wi->o", conv.weight, text[0, t:t + 2]) + conv.bias for t in range(3)])
    assert torch.allclose(alone[0, 4:8], windows.relu().amax(0), atol=1e-6)


def test_similarity_is_eq_2_on_hand_made_vectors():
    f_a, b_a = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]])
    f_b, b_b = torch.tensor([[3.0, 3.0]]), torch.tensor([[1.0, 0.0]])
    expected = 1.0 + 1 / math.sqrt(2)  # cos(f_a, b_b) = 1, cos(f_b, b_a) = 1/sqrt(2)
    assert coupled_pair_similarity(f_a, b_a, f_b, b_b).item() == pytest.approx(expected)
    pairs = torch.stack([torch.cat([f_a, f_b]), torch.cat([b_a, b_b])], dim=1)  # (2, 2, D): docs a and b
    scores = CTPE(WordEmbeddings(init="random")).similarity(pairs, pairs)
    assert scores[0, 1].item() == pytest.approx(expected) and scores[1, 0].item() == pytest.approx(expected)
    assert scores[0, 0].item() == pytest.approx(0.0)  # sim(d, d) = 2 cos(f, b), not 2 (§3.3)


def unit(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


def test_margin_loss_is_zero_once_met_and_positive_otherwise():
    loss = CTPE(WordEmbeddings(init="random")).loss  # the method's loss, M = 0.1
    f = torch.tensor([unit(0), unit(0)])
    b_pos = torch.tensor([unit(0), unit(60)])  # cos+ = 1, 0.5
    b_neg = torch.tensor([unit(90), [0.45, math.sqrt(1 - 0.45**2)]])  # cos- = 0, 0.45
    per_example = [0.0, 0.1 - (0.5 - 0.45)]
    out = loss(f, b_pos, f, b_neg)["coupled_margin_loss"]
    assert out.item() == pytest.approx(sum(per_example) / 2)
    assert loss(f[:1], b_pos[:1], f[:1], b_neg[:1])["coupled_margin_loss"].item() == 0.0
    assert loss(f[1:], b_pos[1:], f[1:], b_neg[1:])["coupled_margin_loss"].item() == pytest.approx(0.05)
    assert CoupledMarginLoss(0.5)(f[:1], b_pos[:1], f[:1], b_neg[:1])["coupled_margin_loss"].item() == 0.0


@pytest.fixture()
def ctpe() -> CTPE:
    torch.manual_seed(0)
    model = CTPE(WordEmbeddings(init="random", dim=8, min_count=1), n_filters=4, max_length=16)
    docs = clustered_documents()
    model.prepare(docs, docs[:4])
    return model


def test_training_pairs_are_coupled_and_uncoupled_and_resampled(ctpe):
    docs = clustered_documents()
    collate = ctpe.collator("fit")
    torch.manual_seed(3)
    batch = collate(docs[:6] + [Document("untitled", sections=[Section("", "tide wave")])])
    assert isinstance(batch, CoupledPairBatch) and len(batch) == 6 and batch.skipped == 1
    parts = {d.id: split_ids(d, "title", ctpe.tokenizer.encode, 16) for d in docs}
    formers, latters = {tuple(p[0]) for p in parts.values()}, {tuple(p[1]) for p in parts.values()}

    def row(tokens, i):
        return tuple(tokens.input_ids[i][tokens.attention_mask[i].bool()].tolist())

    sides = []
    for i, doc in enumerate(docs[:6]):
        assert (row(batch.former, i), row(batch.latter, i)) == tuple(map(tuple, parts[doc.id]))
        neg_f, neg_b = row(batch.negative_former, i), row(batch.negative_latter, i)
        assert neg_f in formers and neg_b in latters
        own_f, own_b = neg_f == row(batch.former, i), neg_b == row(batch.latter, i)
        assert own_f != own_b  # exactly one side is the document's own: (f_i, b_j) or (f_j, b_i)
        sides.append(own_f)
    assert set(sides) == {True, False}  # both kinds of uncoupled pair are drawn
    torch.manual_seed(3)
    assert torch.equal(collate(docs[:6]).negative_latter.input_ids, batch.negative_latter.input_ids)
    draws = set()
    for seed in range(8):
        torch.manual_seed(seed)
        draws.add(tuple(collate(docs[:6]).negative_former.input_ids.flatten().tolist()))
    assert len(draws) > 1  # a new epoch (new RNG state) draws new uncoupled pairs


def test_validation_pairs_do_not_depend_on_the_global_rng(ctpe):
    collate = ctpe.collator("validate")
    docs = clustered_documents()[:4]
    torch.manual_seed(1)
    first = collate(docs)
    torch.manual_seed(2)
    assert torch.equal(collate(docs).negative_former.input_ids, first.negative_former.input_ids)


def test_training_step_updates_both_cnns_and_leaves_word_vectors_fixed(ctpe):
    batch = ctpe.collator("fit")(clustered_documents())
    terms = ctpe.losses(batch)
    assert set(terms) == {"coupled_margin_loss", "negatives_per_anchor", "skipped_documents"}
    before = ctpe.encoder.token_vectors.embedding.weight.clone()
    optimizer = ctpe.configure_optimizers()
    ctpe.total_loss(terms).backward()
    encoder = ctpe.encoder
    assert encoder.former is not encoder.latter
    for module in (encoder.former, encoder.latter):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())
    assert encoder.token_vectors.embedding.weight.grad is None  # fixed by default (the authors' code)
    optimizer.step()
    assert torch.equal(encoder.token_vectors.embedding.weight, before)


def test_trainable_word_vectors_get_gradients_and_survive_a_checkpoint():
    torch.manual_seed(0)
    docs = clustered_documents()
    model = CTPE(WordEmbeddings(init="random", dim=8, min_count=1, trainable=True), n_filters=4, max_length=16)
    model.prepare(docs)
    model.total_loss(model.losses(model.collator("fit")(docs))).backward()
    weight = model.encoder.token_vectors.embedding.weight
    assert weight.requires_grad and weight.grad is not None and weight.grad.abs().sum() > 0
    checkpoint = {}
    model.on_save_checkpoint(checkpoint)
    restored = CTPE(WordEmbeddings(init="random", dim=8, min_count=1, trainable=True), n_filters=4, max_length=16)
    restored.on_load_checkpoint(checkpoint)
    assert restored.encoder.token_vectors.embedding.weight.requires_grad
    fixed = CTPE(WordEmbeddings(init="random", dim=8, min_count=1), n_filters=4, max_length=16)
    fixed.on_load_checkpoint(checkpoint)
    assert not fixed.encoder.token_vectors.embedding.weight.requires_grad


def test_shared_part_encoder_is_one_cnn_for_both_parts():
    torch.manual_seed(0)
    docs = clustered_documents()
    model = CTPE(WordEmbeddings(init="random", dim=8, min_count=1), n_filters=4, max_length=16,
                 share_part_encoders=True)
    model.prepare(docs)
    encoder = model.encoder
    assert encoder.former is encoder.latter
    separate = CTPE(WordEmbeddings(init="random", dim=8, min_count=1), n_filters=4, max_length=16)
    separate.prepare(docs)
    count = sum(p.numel() for p in encoder.parameters())
    assert sum(p.numel() for p in separate.encoder.parameters()) - count == sum(
        p.numel() for p in encoder.former.parameters())
    batch = model.collator("predict")(docs[:2])
    ids, mask = batch.latter.input_ids, batch.latter.attention_mask
    assert torch.equal(encoder.encode(ids, mask, "former"), encoder.encode(ids, mask, "latter"))


def test_predict_exports_pairs_and_counts_unsplittable(ctpe):
    docs = clustered_documents()[:3] + [Document("untitled", sections=[Section("", "tide")])]
    out = ctpe.predict_step(ctpe.collator("predict")(docs), 0)
    assert out["ids"] == ["sea0", "sea1", "sea2"] and out["skipped"] == 1
    assert out["former"].shape == out["latter"].shape == (3, 16)


def test_word2vec_initialisation_is_gensims_vectors_and_repeatable():
    texts = [d.title + " " + d.text for d in clustered_documents()]
    spec = WordEmbeddings(init="word2vec", dim=8, min_count=1, epochs=2)
    tokenizer, vectors = spec.build(texts)
    _, again = spec.build(texts)
    weight = vectors.embedding.weight
    assert torch.equal(weight, again.embedding.weight)
    assert weight[0].abs().sum() == 0  # padding row
    from gensim.models import Word2Vec

    from lit_docemb.models.word_vectors import stable_hash
    model = Word2Vec([preprocess_words(t) for t in texts], vector_size=8, window=10, min_count=1, sg=1, epochs=2,
                     workers=1, seed=1, hashfxn=stable_hash)
    assert torch.allclose(weight[tokenizer.index["tide"]], torch.from_numpy(model.wv["tide"].copy()))


def test_fit_without_vocabulary_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no vocabulary yet"):
        CTPE().collator("fit")


def test_transformer_token_states_stay_frozen(tiny_encoder_dir):
    model = CTPE(TransformerTokens(tiny_encoder_dir), n_filters=4, max_length=32)
    docs = clustered_documents()
    model.prepare(docs)
    model.train()
    assert not model.encoder.token_vectors.model.training  # dropout stays off
    model.total_loss(model.losses(model.collator("fit")(docs))).backward()
    assert all(p.grad is None for p in model.encoder.token_vectors.parameters())
    assert all(p.grad is not None for p in model.encoder.former.parameters())
    with pytest.raises(ValueError, match="exceeds the 128 positions"):
        CTPE(TransformerTokens(tiny_encoder_dir), max_length=200)


def test_adam_at_the_paper_rate_fits_a_fixed_set_of_pairs():
    """Learning check: on 6 documents (fresh uncoupled pairs every step) Adam at lr 0.001 brings the margin
    loss well below its starting level (same-topic partners keep it from reaching 0)."""
    torch.manual_seed(0)
    docs = clustered_documents()[::3][:6]
    model = CTPE(WordEmbeddings(init="random", dim=16, min_count=1), n_filters=32, max_length=32)
    model.prepare(docs)
    optimizer = model.configure_optimizers()
    assert isinstance(optimizer, torch.optim.Adam) and optimizer.defaults["lr"] == 1e-3
    collate, losses = model.collator("fit"), []
    for _ in range(40):
        loss = model.total_loss(model.losses(collate(docs)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    first, last = sum(losses[:5]) / 5, sum(losses[-10:]) / 10
    assert first > 0.05 and last < 0.5 * first, (first, last)


def test_fit_reads_the_field_cache_built_once(corpus_jsonl, tmp_path):
    import lightning as L

    from lit_docemb.data import JSONLDataModule

    def fit() -> tuple[CTPE, JSONLDataModule]:
        model = CTPE(WordEmbeddings(init="random", min_count=1, dim=8), pos=0.5, n_filters=4, kernel_widths=[1, 2],
                     token_cache_dir=str(tmp_path / "fields"))
        data = JSONLDataModule(paths=[corpus_jsonl], batch_size=4, num_workers=0, val_fraction=0.2, max_documents=20)
        L.Trainer(accelerator="cpu", max_steps=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False, limit_val_batches=1).fit(model, datamodule=data)
        return model, data

    model, data = fit()
    assert isinstance(data.train_set[0], Document)  # the datasets serve documents; the collators read the cache
    assert len(model.field_rows.rows) == len(data.documents) == 20
    assert model.collator("fit").splitter.cached is model.field_rows
    assert model.collator("predict").splitter.cached is None  # documents of any corpus: from their text
    tables = sorted(p for p in (tmp_path / "fields").rglob("*.arrow"))
    assert tables
    fit()  # the same corpus and vocabulary: the table is reopened, not rebuilt
    assert sorted(p for p in (tmp_path / "fields").rglob("*.arrow")) == tables
