"""CoLDE (seed 003): collation through the method, structural embeddings, chunkwise attention, the ablation switches,
GradCache, similarity matrices, similarity groups and a CPU fast_dev_run of every configs/colde config."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml
from conftest import _topic_texts
from corpus_files import write_aan_network, write_google_patents, write_lra, write_wikipedia_dump

from lit_docemb.commands import main
from lit_docemb.eval.figures import similarity_heatmaps
from lit_docemb.data.core.batches import SectionChunks, TokenBatch
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.corpora.aan import DocumentPair
from lit_docemb.data.corpora.similarity_groups import citation_groups, link_jaccard_groups
from lit_docemb.errors import BadArgument
from lit_docemb.losses import CosineSimilarityLoss
from lit_docemb.methods import CoLDE
from lit_docemb.methods.colde import similarity_matrices
from lit_docemb.views.colde import select_documents
from lit_docemb.models import EncoderSpec

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"chunk_tokens": 24, "num_heads": 2, "lstm_output_size": 16, "projection_size": 8, "chunk_embeddings": 16}


def texts(n: int, start: int = 0) -> list[str]:
    return [t for _, t in _topic_texts()[start:start + n]]


def documents(n: int = 6, groups: int = 2) -> list[Document]:
    return [Document(f"d{i}", "", [Section("", t[:400]), Section("h", t[400:900])], label=str(i % groups))
            for i, t in enumerate(texts(n))]


@pytest.fixture(scope="module")
def colde_base(no_dropout_encoder_dir):
    return CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL)


@pytest.fixture
def colde(colde_base):
    return copy.deepcopy(colde_base)


def one_section_chunks(colde: CoLDE, section: int, chunk: int) -> SectionChunks:
    ids = torch.tensor([[2, 50, 60, 70, 3]])
    return SectionChunks(TokenBatch(ids, torch.ones_like(ids)), torch.tensor([section]), torch.tensor([chunk]),
                         torch.tensor([1]))


# --- sections and chunks ----------------------------------------------------------------------------------------


def test_collator_chunks_every_token_without_silent_cap(colde):
    long = Document("long", "", [Section("", " ".join(texts(1)[0].split()[:300])), Section("b", "short end.")])
    batch = colde._collator(2)([long])
    body = colde.hparams.chunk_tokens - 2
    tokens = colde.tokenizer(long.sections[0].text, add_special_tokens=False)["input_ids"]
    assert batch.sections.chunks_per_section[0] == -(-len(tokens) // body) > 5  # all chunks, ceil division
    assert batch.sections.chunks.attention_mask.sum(1).max() <= colde.hparams.chunk_tokens
    assert batch.sections.chunk_ids[:3].tolist() == [0, 1, 2] and batch.truncated_chunks == 0
    capped = CoLDE(colde.encoder_spec, **SMALL | {"max_chunks_per_section": 2})
    batch_capped = capped.collator("fit")([long])
    assert batch_capped.sections.chunks_per_section.tolist() == [2, 1]
    assert batch_capped.truncated_chunks == int(batch.sections.chunks_per_section[0]) - 2
    assert capped.losses(batch_capped)["truncated_chunks"] == batch_capped.truncated_chunks


def test_collator_counts_too_short_documents_and_labels_groups(colde):
    docs = documents(4) + [Document("tiny", "", [Section("", "one")])]
    batch = colde.collator("fit")(docs)
    assert batch.ids == ["d0", "d1", "d2", "d3"] and batch.skipped == 1
    assert batch.labels[0] == batch.labels[2] != batch.labels[1] == batch.labels[3]
    assert batch.sections_per_document == 2 and len(batch.sections) == 8


def test_groups_documents_makes_a_documents_own_sections_its_only_positives(colde, no_dropout_encoder_dir):
    """groups: documents reads no label and no matching pair: the loss is SupCon with each document its own group,
    the same as on the same documents unlabelled, and every other section a negative."""
    own = CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL | {"groups": "documents"})
    own.load_state_dict(colde.state_dict())
    docs = documents(4)
    batch = own.collator("fit")(docs)
    assert len(set(batch.labels.tolist())) == 4  # d0 and d2 share label "0", not a group
    unlabelled = colde.collator("fit")([Document(d.id, d.title, d.sections) for d in docs])
    assert torch.equal(batch.labels, unlabelled.labels)
    own.eval(), colde.eval()
    terms, reference = own.losses(batch), colde.losses(unlabelled)
    assert torch.allclose(terms["supcon_loss"], reference["supcon_loss"])
    assert terms["negatives_per_anchor"] == 6  # 8 sections: itself and its sibling excepted
    assert colde.losses(colde.collator("fit")(docs))["negatives_per_anchor"] == 4  # by label: 4 of the same
    pairs = [DocumentPair(docs[0], docs[1], 1), DocumentPair(docs[2], docs[3], 1)]
    assert len(set(own.collator("fit")(pairs).labels.tolist())) == 4
    with pytest.raises(BadArgument, match="groups: .*set groups: labels"):
        CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL | {"groups": "documents", "objective": "cosine",
                                                              "augmentation": False})
    with pytest.raises(BadArgument, match="groups: must be 'labels' or 'documents', got 'classes'"):
        CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL | {"groups": "classes"})


# --- structural embeddings and chunkwise attention -----------------------------------------------------------------
def test_section_and_chunk_embeddings_change_the_output_by_id(colde):
    colde.eval()
    encode = colde.model.encode_chunks
    base = encode(one_section_chunks(colde, 0, 0))
    assert not torch.allclose(base, encode(one_section_chunks(colde, 1, 0)))
    assert not torch.allclose(base, encode(one_section_chunks(colde, 0, 1)))
    assert torch.allclose(base, encode(one_section_chunks(colde, 0, 0)))
    # they are added to the input embeddings: zeroing them gives the plain encoder's output
    with torch.no_grad():
        colde.model.structure.section.weight.zero_()
        colde.model.structure.chunk.weight.zero_()
    chunks = one_section_chunks(colde, 1, 1)
    plain = colde.model.encoder(chunks.chunks.input_ids, chunks.chunks.attention_mask)
    assert torch.allclose(encode(chunks), plain, atol=1e-6)


def test_default_optimizer_is_adam_with_l2_weight_decay_as_the_authors_code(colde):
    """§4.1.2 "an Adam optimizer with a weight decay of 0.01": the authors' document_matching.py builds
    torch.optim.Adam(weight_decay=...), the L2 form (the decay enters the gradient Adam normalises), not AdamW."""
    optimizer = colde.configure_optimizers()
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    assert type(optimizer) is torch.optim.Adam
    assert optimizer.defaults["lr"] == 5e-5 and optimizer.defaults["weight_decay"] == 0.01
    weight = torch.nn.Parameter(torch.ones(1))  # one step on a zero loss gradient: L2 moves it by lr, AdamW by lr*wd
    step = type(optimizer)([weight], lr=0.1, weight_decay=0.01)
    weight.grad = torch.zeros(1)
    step.step()
    assert torch.allclose(weight.detach(), torch.tensor([0.9]), atol=1e-4)


def test_every_colde_config_trains_with_adam_and_batch_75():
    for path in sorted((ROOT / "configs" / "colde").glob("*.yaml")):
        config = yaml.safe_load(path.read_text())
        assert config["model"]["init_args"]["optimizer"]["class_path"] == "torch.optim.Adam", path
        assert config["model"]["init_args"]["optimizer"]["init_args"]["weight_decay"] == 0.01, path
        batch = config["data"]["init_args"].get("global_batch_size")
        assert batch == 75, (path, batch)


def test_chunk_attention_is_trained_and_section_p_attends_to_section_p_plus_1(colde):
    batch = colde.collator("fit")(documents(4))
    optimizer = colde.configure_optimizers()
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    attention = list(colde.model.chunk_attention.parameters())
    assert attention and all(id(p) in optimized for p in attention)
    assert "model.chunk_attention.attention.in_proj_weight" in colde.state_dict()
    colde.losses(batch)["supcon_loss"].backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in attention)
    assert all(p.grad is not None for p in colde.model.structure.parameters())
    encoded = colde._encode(batch)
    counts = batch.sections.chunks_per_section.tolist()
    for s, weights in enumerate(encoded.attention):  # (heads, C_p, C_p+1), cyclic within the document
        target = s + 1 if s % 2 == 0 else s - 1
        assert weights.shape == (2, counts[s], counts[target])
        assert torch.allclose(weights.sum(-1), torch.ones(2, counts[s]), atol=1e-5)


# --- ablations -----------------------------------------------------------------------------------------------------
def test_minus_aug_one_section_and_no_structural_embeddings(no_dropout_encoder_dir):
    model = CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL | {"augmentation": False})
    batch = model.collator("fit")(documents(4))
    assert batch.sections_per_document == 1 and len(batch.sections) == 4 and model.model.structure is None
    assert set(batch.sections.section_ids.tolist()) == {0}
    model.eval()
    assert torch.allclose(model.model.encode_chunks(one_section_chunks(model, 0, 0)),
                          model.model.encode_chunks(one_section_chunks(model, 1, 3)))
    terms = model.losses(batch)
    assert torch.isfinite(terms["supcon_loss"]) and terms["anchors_without_positive"] == 0  # 2 groups of 2


def test_minus_lstm_section_is_the_mean_of_its_chunk_vectors(no_dropout_encoder_dir):
    model = CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL | {"aggregation": "mean"})
    assert not hasattr(model.model, "lstm") and not hasattr(model.model, "chunk_attention")
    batch = model.collator("fit")(documents(2))
    model.eval()
    encoded = model._encode(batch)
    vectors = model.model.encode_chunks(batch.sections)
    means = torch.stack([c.mean(0) for c in torch.split(vectors, batch.sections.chunks_per_section.tolist())])
    assert torch.allclose(encoded.sections, means, atol=1e-6) and encoded.attention == []
    assert torch.allclose(encoded.projected, model.model.projection(means), atol=1e-6)


def test_minus_cl_cosine_objective_on_whole_documents(no_dropout_encoder_dir):
    with pytest.raises(ValueError, match="augmentation: false"):
        CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL | {"objective": "cosine"})
    model = CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL | {"objective": "cosine", "augmentation": False})
    batch = model.collator("fit")(documents(4))
    terms = model.losses(batch)
    assert "supcon_loss" not in terms and isinstance(model.model.projection, torch.nn.Identity)
    z = torch.nn.functional.normalize(model._encode(batch).sections, dim=-1)
    same = (batch.labels[:, None] == batch.labels[None, :]).float()
    off = ~torch.eye(4, dtype=torch.bool)
    assert torch.allclose(terms["cosine_loss"], ((z @ z.T - same)[off] ** 2).mean(), atol=1e-5)


def test_cosine_similarity_loss_by_hand():
    features = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    labels = torch.tensor([0, 0, 1])
    c = 2 ** -0.5  # cos(x, y) between rows 0/2 and 1/2; rows 0/1 are orthogonal
    expected = 2 * ((0 - 1) ** 2 + (c - 0) ** 2 + (c - 0) ** 2) / 6
    loss = CosineSimilarityLoss(gather_across_devices=False)(features, labels)["cosine_loss"]
    assert loss.item() == pytest.approx(expected)


# --- GradCache ------------------------------------------------------------------------------------------------------
def test_grad_cache_equals_the_plain_loss_and_gradients(colde):
    batch = colde.collator("fit")(documents(6))
    plain = colde.losses(batch)["supcon_loss"]
    plain.backward()
    reference = {n: p.grad.clone() for n, p in colde.named_parameters() if p.grad is not None}
    colde.zero_grad()
    colde.grad_cache_token_budget = 60
    out = colde.grad_cache_forward(batch)
    out.backward_loss.backward()
    assert out.sub_batches > 1 and out.loss.item() == pytest.approx(plain.item(), abs=1e-5)
    for name, grad in reference.items():
        assert torch.allclose(dict(colde.named_parameters())[name].grad, grad, atol=1e-5), name


def test_select_documents_takes_their_sections_and_chunks(colde):
    batch = colde.collator("fit")(documents(3))
    sub = select_documents(batch, torch.tensor([2, 0]))
    assert sub.ids == ["d2", "d0"]
    counts = batch.sections.chunks_per_section.tolist()
    assert sub.sections.chunks_per_section.tolist() == counts[4:6] + counts[0:2]
    assert len(sub.sections.chunks) == sum(counts[4:6] + counts[0:2])


# --- interpretability -------------------------------------------------------------------------------------------------
def test_similarity_matrices_shapes_self_similarity_and_heatmap(colde, tmp_path):
    docs = documents(3)
    out = similarity_matrices(colde, docs)
    split = colde.collator("fit")(docs)
    chunks = int(split.sections.chunks_per_section.sum())
    assert out["document_similarity"].shape == (3, 3) and out["section_similarity"].shape == (6, 6)
    assert out["chunk_similarity"].shape == (chunks, chunks) and len(out["chunk_labels"]) == chunks
    assert out["section_labels"][:2] == ["d0/S0", "d0/S1"] and out["chunk_labels"][0] == "d0/S0C0"
    for level in ("document", "section", "chunk"):
        matrix = out[f"{level}_similarity"]
        assert torch.allclose(matrix.diagonal(), torch.ones(len(matrix)), atol=1e-5)
        assert torch.allclose(matrix, matrix.T, atol=1e-6)
    assert colde.training  # mode restored
    path = similarity_heatmaps(out, tmp_path / "fig4.png")
    assert path.stat().st_size > 1000
    with pytest.raises(ValueError, match="at least two"):
        similarity_matrices(colde, docs[:1])


# --- similarity groups --------------------------------------------------------------------------------------------
def test_citation_groups_with_as_many_random_irrelevant_papers():
    cites = {"a": ["b", "c"], "b": ["c"], "c": [], "d": ["a"], "e": [], "f": [], "g": [], "h": [], "i": ["zz"]}
    docs = [Document(i, "", [Section("", "x")], metadata={"citations": c}) for i, c in cites.items()]
    groups = citation_groups(docs, seed=1)
    assert groups["a"] == groups["b"] == groups["c"] == "cites:a"  # b's group would be {b, c}: c is taken
    assert "d" not in groups or groups["d"].startswith("single:")  # d cites a, already grouped: alone
    singles = [i for i, g in groups.items() if g.startswith("single:")]
    assert len(singles) == 3 and len({groups[i] for i in singles}) == 3


def test_link_jaccard_groups_strictly_above_threshold_and_two_similar():
    links = {"a": "pqr", "b": "pqrs", "c": "pqrt", "d": "pq", "e": "xyz", "f": "xy", "g": "pqrst"}
    docs = [Document(i, "", [Section("", "x")], metadata={"links": list(v)}) for i, v in links.items()]
    # Jaccard: a-b 3/4, a-c 3/4, b-c 3/5, a-d 2/3, a-g 3/5, b-g 4/5, c-g 4/5, d-b 2/4 (not > 0.5), e-f 2/3
    groups = link_jaccard_groups(docs, 0.5, 2)
    assert set(groups) == {"a", "b", "c", "g"} and len(set(groups.values())) == 1  # d, e, f: one similar only
    assert link_jaccard_groups(docs, 0.5, 1)["e"] == link_jaccard_groups(docs, 0.5, 1)["f"]


# --- configs through the CLI --------------------------------------------------------------------------------------
def lit(text: str) -> str:
    return repr(text.encode())


CONFIGS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs" / "colde").glob("*.yaml"))


@pytest.mark.parametrize("config", CONFIGS)
def test_every_colde_config_runs_fast_dev_run(config, tiny_encoder_dir, tmp_path):
    data = yaml.safe_load((ROOT / config).read_text())["data"]
    args = ["fit", "--config", str(ROOT / config), f"--model.init_args.encoder.name={tiny_encoder_dir}",
            "--model.init_args.chunk_tokens=32", "--model.init_args.lstm_output_size=16",
            "--model.init_args.projection_size=8", "--model.init_args.num_heads=2", "--data.init_args.global_batch_size=4",
            "--data.init_args.num_workers=0", "--trainer.accelerator=cpu", "--trainer.devices=1",
            "--trainer.logger=false", "--trainer.fast_dev_run=2", f"--trainer.default_root_dir={tmp_path}"]
    grad_cache = config.endswith("colde/aan.yaml")  # the paper's setting also through GradCache, in bf16 autocast
    args += ["--trainer.precision=bf16-mixed", "--model.init_args.grad_cache_token_budget=64"] if grad_cache else [
        "--trainer.precision=32-true"]
    corpus = data["init_args"].get("corpus", {}).get("class_path", "")
    matching_split = bool(data["init_args"].get("test_fraction"))  # 30% of the groups for validation, 30% for test
    if matching_split:  # full batches of two documents (a batch of one has no negative and one GradCache sub-batch)
        args += ["--data.init_args.test_fraction=0.3", "--data.init_args.global_batch_size=2", "--data.init_args.drop_last=true"]
    if data["class_path"].endswith("AANDataModule"):
        args.append(f"--data.init_args.source={write_lra(tmp_path / 'lra')}")
    elif corpus.endswith("AANDataModule"):
        aan = write_aan_network(tmp_path / "aan")
        if matching_split:  # a fourth citation group: two groups (four or five papers) and an irrelevant one train
            with open(aan / "acl.txt", "a") as citations:
                citations.write("P7 ==> P8\n")
        args += [f"--data.init_args.corpus.init_args.source={aan}",
                 "--data.init_args.corpus.init_args.citations_file=acl.txt", "--data.init_args.val_fraction=0.3"]
    elif corpus.endswith("PatentDataModule"):  # six CPC groups of three patents and four single ones
        args += [f"--data.init_args.corpus.init_args.source={write_google_patents(tmp_path / 'patents.json.gz')}",
                 f"--data.init_args.corpus.init_args.cache_dir={tmp_path / 'cache'}", "--data.init_args.val_fraction=0.3"]
    else:
        dump = write_wikipedia_dump(tmp_path / "enwiki.xml", groups=6 if matching_split else 2)
        args += [f"--data.init_args.corpus.init_args.source={dump}",
                 f"--data.init_args.corpus.init_args.cache_dir={tmp_path / 'cache'}",
                 "--data.init_args.val_fraction=0.3"]
    cli = main(args)
    metrics = cli.trainer.callback_metrics
    assert cli.trainer.global_step == 2
    loss = "train/cosine_loss" if cli.model.hparams.objective == "cosine" else "train/supcon_loss"
    assert torch.isfinite(metrics[loss])
    assert (metrics.get("train/grad_cache_sub_batches", 0) > 1) == grad_cache
    if data["init_args"].get("mode") == "pairs" or matching_split:
        assert 0.0 <= float(metrics["val/matching_f1"]) <= 1.0 and 0 <= float(metrics["val/matching_accuracy"]) <= 1
        matching = next(c for c in cli.trainer.callbacks if type(c).__name__ == "ValidationMatching")
        assert matching.threshold == pytest.approx(float(metrics["val/matching_threshold"]))


def test_fit_then_test_reuses_the_validation_threshold_and_matching_cli(tiny_encoder_dir, tmp_path):
    from lit_docemb.commands.matching import main as matching_main

    common = ["--config", str(ROOT / "configs/colde/aan.yaml"), f"--model.init_args.encoder.name={tiny_encoder_dir}",
              "--model.init_args.chunk_tokens=32", "--model.init_args.lstm_output_size=16",
              "--model.init_args.projection_size=8", "--model.init_args.num_heads=2",
              f"--data.init_args.corpus.init_args.source={write_aan_network(tmp_path / 'aan')}",
              "--data.init_args.corpus.init_args.citations_file=acl.txt", "--data.init_args.val_fraction=0.3",
              "--data.init_args.test_fraction=0.3", "--data.init_args.global_batch_size=4", "--data.init_args.num_workers=0"]
    trainer = ["--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32-true",
               "--trainer.logger=false", "--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={tmp_path}"]
    fitted = main(["fit", *common, *trainer, "--trainer.max_steps=2", "--trainer.limit_val_batches=1"])
    matching = next(c for c in fitted.trainer.callbacks if type(c).__name__ == "ValidationMatching")
    threshold = matching.threshold
    assert fitted.trainer.callback_metrics["val/matching_threshold"] == pytest.approx(threshold)
    last = tmp_path / "checkpoints" / "last.ckpt"
    tested = main(["test", *common, *trainer, f"--ckpt_path={last}"])
    metrics = tested.trainer.callback_metrics
    assert metrics["test/matching_threshold"] == pytest.approx(threshold)  # chosen on validation, not on test
    assert {f"test/matching_{m}" for m in ("precision", "recall", "f1", "accuracy")} <= set(metrics)
    out = matching_main([*common, "--ckpt_path", str(last), "--accelerator", "cpu"])
    assert set(out) >= {"threshold/f1", "threshold/threshold", "classifier/accuracy"}
    assert "classifier/validation_accuracy" not in out  # training is documents: the classifier fits validation
    from lit_docemb.commands.evaluate import main as evaluate_main

    evaluated = evaluate_main([*common, "--ckpt_path", str(last), "--evaluation", "matching", "--accelerator", "cpu",
                               "--output", str(tmp_path / "evaluation")])["matching"]
    assert evaluated["matching/threshold/f1"] == pytest.approx(out["threshold/f1"])  # the test pairs, same protocol
    assert all(0.0 <= out[k] <= 1.0 for k in out if not k.endswith("threshold"))


def test_similarity_group_datamodule_labels_aan_network_papers(tmp_path):
    from lit_docemb.data import AANDataModule, SimilarityGroupDataModule

    corpus = AANDataModule(str(write_aan_network(tmp_path / "aan")), layout="network", citations_file="acl.txt",
                           cache_dir=str(tmp_path / "cache"))
    data = SimilarityGroupDataModule(corpus, rule="citations", val_fraction=0.0, num_workers=0)
    data.setup("fit")
    labels = {doc.id: doc.label for doc in data.train_set}
    assert labels["aan:P0"] == labels["aan:P1"] == labels["aan:P2"] != labels["aan:P3"] == labels["aan:P4"]
    assert labels["aan:P5"] == labels["aan:P6"] and len(labels) == 10  # 7 grouped + 3 random (all there is)
    assert sum(label.startswith("single:") for label in labels.values()) == 3
    wiki = SimilarityGroupDataModule(corpus, rule="link_jaccard")
    with pytest.raises(ValueError, match="no similarity group"):  # AAN papers keep no links
        wiki.setup("fit")


def test_predict_without_similarities_gives_the_same_embeddings(colde):
    docs = documents(3)
    colde.eval()
    full = colde.predict_step(colde.collator("predict")(docs), 0)
    colde.hparams.predict_similarities = False
    light = colde.predict_step(colde.collator("predict")(docs), 0)
    assert set(light) == {"ids", "embeddings"} and light["ids"] == full["ids"] == ["d0", "d1", "d2"]
    assert torch.allclose(light["embeddings"], full["embeddings"], atol=1e-6)
    assert similarity_matrices(colde, docs)["section_similarity"].shape == (6, 6)  # the API still splits


def test_checkpoints_with_the_old_matching_threshold_buffers_still_load(colde):
    state = {k: v.clone() for k, v in colde.state_dict().items()}
    checkpoint = {"state_dict": state | {"matching_threshold": torch.tensor(0.4),
                                         "matching_threshold_chosen": torch.tensor(True)}}
    with pytest.raises(RuntimeError, match="matching_threshold"):
        colde.load_state_dict(checkpoint["state_dict"])  # the keys are gone from the method
    colde.on_load_checkpoint(checkpoint)
    assert set(checkpoint["state_dict"]) == set(state)
    colde.load_state_dict(checkpoint["state_dict"])  # strict, as Lightning loads it


# --- documents of any length (issue 18, deliverable 6) ------------------------------------------------------------
def long_document(chunks: int, colde: CoLDE) -> Document:
    """One section whose tokens fill more than ``chunks`` chunks of ``colde``'s collator."""
    words = " ".join(texts(20)).split()[:chunks * (colde.hparams.chunk_tokens - 2) + 1]  # a word: >= 1 token
    return Document("long", "", [Section("", " ".join(words))], label="0")


def test_a_document_longer_than_the_chunk_table_is_truncated_and_counted(colde):
    table = colde.hparams.chunk_embeddings
    docs = [long_document(2 * table, colde)] + documents(3)
    batch = colde.collator("fit")(docs)  # two sections, each beyond the table
    assert int(batch.sections.chunk_ids.max()) == table - 1
    assert batch.sections.chunks_per_section[:2].tolist() == [table, table]
    assert batch.truncated_chunks > 0 and batch.ids == ["long", "d0", "d1", "d2"]
    assert colde.losses(batch)["truncated_chunks"] == batch.truncated_chunks
    colde.eval()
    out = colde.predict_step(colde.collator("predict")(docs), 0)  # unsplit: one section of 2x the table
    assert out["ids"] == ["long", "d0", "d1", "d2"] and out["embeddings"].isfinite().all()
    assert out["embeddings"].shape == (4, colde.model.output_size)


def test_without_structural_embeddings_no_chunk_is_dropped(no_dropout_encoder_dir):
    colde = CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL | {"augmentation": False})
    batch = colde.collator("fit")([long_document(2 * SMALL["chunk_embeddings"], colde)])
    assert batch.truncated_chunks == 0 and int(batch.sections.chunks_per_section[0]) > 2 * SMALL["chunk_embeddings"]
