"""``python -m lit_docemb export``: the Hugging Face and sentence-transformers forms load offline from the folder
and give the vectors ``embed`` gives; methods without such a form are refused with a pointer to ``embed``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import _topic_texts
from runs import run_embed, save_run, write_tsv

from lit_docemb.commands import main
from lit_docemb.data import PassageSpec
from lit_docemb.data.core.document import Document, Section, query_document
from lit_docemb.data.core.text import chunk_passages
from lit_docemb.data.corpora.jsonl import read_jsonl
from lit_docemb.data.core.tokens import document_text
from lit_docemb.eval.embedding import embed_documents
from lit_docemb.export.forms import export_method
from lit_docemb.export.modules import GraphDocumentModule
from lit_docemb.methods import DECA, CoLDE, DocSplit, GraphRoBERTa
from lit_docemb.methods.deca_components import EncoderBackbone
from lit_docemb.models import EncoderSpec

SentenceTransformer = pytest.importorskip("sentence_transformers").SentenceTransformer


def long_documents(n: int = 4) -> list[Document]:
    """Titled one-section documents of 60-300 words: several passages each for Graph-RoBERTa."""
    texts = [" ".join(t.split()[:60 + 80 * i]) for i, (_, t) in enumerate(_topic_texts()[:n])]
    return [Document(f"d{i}", title=f"Topic {i}", sections=[Section("", t)]) for i, t in enumerate(texts)]


def test_docsplit_hf_and_sentence_transformers_round_trip(tiny_encoder_dir, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(0)
    args = {"encoder": {"name": tiny_encoder_dir, "pooling": "mean", "max_length": 64}}
    method = DocSplit(**args)
    config, ckpt = save_run(method, tmp_path / "run", args)
    main(["export", "--config", str(config), "--ckpt_path", str(ckpt), "--output", str(tmp_path / "hf"),
          "--format", "hf"])
    main(["export", "--config", str(config), "--ckpt_path", str(ckpt), "--output", str(tmp_path / "st")])
    docs = long_documents()
    expected = embed_documents(method, docs).numpy()

    hf, tokenizer = AutoModel.from_pretrained(tmp_path / "hf"), AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert (tmp_path / "hf" / "model.safetensors").is_file()
    tokens = tokenizer([document_text(d, True) for d in docs], max_length=64, truncation=True, padding=True,
                       return_tensors="pt")
    with torch.no_grad():
        hidden = hf(**tokens).last_hidden_state
    mask = tokens["attention_mask"][..., None].float()
    np.testing.assert_allclose(((hidden * mask).sum(1) / mask.sum(1)).numpy(), expected, atol=1e-5)

    st = SentenceTransformer(str(tmp_path / "st"), device="cpu", local_files_only=True)
    vectors = st.encode([document_text(d, True) for d in docs], batch_size=2)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_graph_roberta_sentence_transformer_equals_embed(tiny_encoder_dir, tmp_path):
    torch.manual_seed(0)
    args = {"encoder": {"name": tiny_encoder_dir}, "node_dim": 16,
            "passages": {"words_per_passage": 20, "max_passage_tokens": 32}, "cache_passages": False}
    method = GraphRoBERTa(**args)
    config, ckpt = save_run(method, tmp_path / "run", args)
    main(["export", "--config", str(config), "--ckpt_path", str(ckpt), "--output", str(tmp_path / "st")])
    # the folder names its module on the library's export floor, a path that no re-layout of the commands moves
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert [m["type"] for m in modules] == ["lit_docemb.export.modules.GraphDocumentModule"]
    docs = [Document(d.id, sections=d.sections) for d in long_documents()]  # a text has no title to read apart
    run_embed(config, ckpt, write_tsv(tmp_path / "docs.tsv", docs, bad_lines=False), tmp_path / "out",
              "--format", "npy")
    embedded = np.load(tmp_path / "out" / "embeddings.npy")
    with pytest.raises(ValueError, match="trust_remote_code"):  # sentence-transformers >= 6 asks for the flag
        SentenceTransformer(str(tmp_path / "st"), device="cpu", local_files_only=True)
    st = SentenceTransformer(str(tmp_path / "st"), device="cpu", local_files_only=True, trust_remote_code=True)
    vectors = st.encode([d.text for d in docs], batch_size=3)
    assert vectors.shape == (4, 16)
    np.testing.assert_allclose(vectors, embedded, atol=1e-5)
    np.testing.assert_allclose(vectors, embed_documents(method, docs).numpy(), atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1])
    # encode_query: single-node graphs as the method embeds its queries (§3.3); encode: the same text as a document
    queries = ["sleeping cats", docs[1].text]
    as_queries = st.encode_query(queries)
    np.testing.assert_allclose(as_queries, embed_documents(method, [query_document(str(i), q) for i, q in
                                                                    enumerate(queries)]).numpy(), atol=1e-5)
    assert not np.allclose(as_queries[0], st.encode(queries[:1])[0], atol=1e-4)


def test_a_passages_option_of_fit_reaches_the_cache_the_checkpoint_and_the_export(tiny_encoder_dir, corpus_jsonl,
                                                                                    tmp_path):
    """``--model.init_args.passages.words_per_passage 6`` sets one key of the one ``passages`` block: the fit's
    passage cache splits at 6 words (its key and its rows), the checkpoint keeps the block, and the exported
    module's config.json holds it, loaded back as the same spec; an export written with the flat keys is refused."""
    run = tmp_path / "run"
    cli = main(["fit", "--model=lit_docemb.methods.GraphRoBERTa", f"--model.init_args.encoder.name={tiny_encoder_dir}",
                "--model.init_args.node_dim=16", "--model.init_args.passages.words_per_passage", "6",
                "--model.init_args.passages.max_passage_tokens=32", f"--model.init_args.passage_cache_dir={tmp_path}",
                "--data=lit_docemb.data.JSONLDataModule", f"--data.paths=[{corpus_jsonl}]", "--data.batch_size=4",
                "--data.num_workers=0", "--data.val_fraction=0.2", "--trainer.accelerator=cpu",
                "--trainer.devices=1", "--trainer.logger=false", "--trainer.enable_progress_bar=false",
                "--trainer.max_steps=1", "--trainer.limit_val_batches=1", f"--trainer.default_root_dir={run}"])
    spec = PassageSpec(words_per_passage=6, max_passage_tokens=32)
    assert cli.model.passage_spec == spec and cli.model.graph_builder.spec is cli.model.passage_spec
    assert cli.model.token_cache.passages is cli.model.passage_spec
    assert cli.model.token_cache.key(cli.datamodule.all_set)["words_per_passage"] == 6
    documents = {d.id: d for d in read_jsonl(corpus_jsonl)}
    rows = list(cli.datamodule.train_set)
    assert rows and all(len(row) == len(chunk_passages(documents[row.id], 6, 100, with_title=True)) for row in rows)
    assert any(len(row) > len(chunk_passages(documents[row.id], 100, 100, with_title=True))
               for row in rows)  # not the default
    ckpt = next((run / "checkpoints").glob("*.ckpt"))
    assert torch.load(ckpt, weights_only=True)["hyper_parameters"]["passages"] == spec.hyperparameters()

    main(["export", "--config", str(run / "config.yaml"), "--ckpt_path", str(ckpt), "--output", str(tmp_path / "st")])
    config = json.loads((tmp_path / "st" / "config.json").read_text())
    assert config["passages"] == spec.arguments() and not {"words_per_passage", "graph"} & set(config)
    loaded = GraphDocumentModule.load(str(tmp_path / "st"))
    assert loaded.spec == spec and loaded.builder.spec == spec

    flat = {k: v for k, v in config.items() if k != "passages"} | {"words_per_passage": 6, "max_passages": 100}
    (tmp_path / "st" / "config.json").write_text(json.dumps(flat))
    with pytest.raises(ValueError, match=r"keys \['max_passages', 'words_per_passage'\] are not GraphDocumentModule's"):
        GraphDocumentModule.load(str(tmp_path / "st"))


def test_deca_with_an_encoder_exports_like_docsplit(tiny_encoder_dir, tmp_path):
    torch.manual_seed(0)
    method = DECA(EncoderBackbone(EncoderSpec(tiny_encoder_dir, max_length=48)))
    export_method(method, tmp_path / "st")
    docs = long_documents(3)
    vectors = SentenceTransformer(str(tmp_path / "st"), device="cpu").encode([document_text(d, True) for d in docs])
    np.testing.assert_allclose(vectors, embed_documents(method, docs).numpy(), atol=1e-5)


COLDE = {"chunk_tokens": 24, "num_heads": 2, "lstm_output_size": 16, "projection_size": 8, "chunk_embeddings": 64,
         "predict_similarities": False}


def test_colde_sentence_transformer_equals_embed(no_dropout_encoder_dir, tmp_path):
    from transformers import AutoModel

    torch.manual_seed(0)
    args = {"encoder": {"name": no_dropout_encoder_dir}, **COLDE}
    method = CoLDE(**args)
    config, ckpt = save_run(method, tmp_path / "run", args)
    main(["export", "--config", str(config), "--ckpt_path", str(ckpt), "--output", str(tmp_path / "hf"),
          "--format", "hf"])
    assert AutoModel.from_pretrained(tmp_path / "hf").config.hidden_size == 32
    main(["export", "--config", str(config), "--ckpt_path", str(ckpt), "--output", str(tmp_path / "st")])
    docs = long_documents()
    run_embed(config, ckpt, write_tsv(tmp_path / "docs.tsv", docs, bad_lines=False), tmp_path / "out",
              "--format", "npy")
    embedded = np.load(tmp_path / "out" / "embeddings.npy")
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert [m["type"] for m in modules] == ["lit_docemb.export.modules.CoLDEDocumentModule"]
    st = SentenceTransformer(str(tmp_path / "st"), device="cpu", local_files_only=True, trust_remote_code=True)
    vectors = st.encode([d.text for d in docs], batch_size=3)
    assert vectors.shape == (4, 16) and st.get_embedding_dimension() == 16
    np.testing.assert_allclose(vectors, embedded, atol=1e-5)
    np.testing.assert_allclose(vectors, embed_documents(method, docs).numpy(), atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1])
    with pytest.raises(ValueError, match="without tokens"):
        st.encode(["", docs[0].text])


def test_colde_ablation_export_follows_its_hparams(no_dropout_encoder_dir, tmp_path):
    """−Aug −LSTM (no section/chunk embeddings, mean of the chunk vectors): the export has no LSTM weights and
    still gives ``embed``'s vectors, of the encoder's size."""
    torch.manual_seed(0)
    method = CoLDE(EncoderSpec(no_dropout_encoder_dir), augmentation=False, aggregation="mean",
                   max_chunks_per_section=3, **COLDE)
    export_method(method, tmp_path / "st")
    st = SentenceTransformer(str(tmp_path / "st"), device="cpu", local_files_only=True, trust_remote_code=True)
    assert not any("lstm" in name or "structure" in name for name, _ in st.named_parameters())
    docs = long_documents(3)
    vectors = st.encode([d.text for d in docs])
    assert vectors.shape == (3, 32)
    np.testing.assert_allclose(vectors, embed_documents(method, docs).numpy(), atol=1e-5)

