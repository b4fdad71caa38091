"""The modules an exported sentence-transformers folder names (lit_docemb/export/modules.py): what they save is
what they load, a text becomes the method's graph (or single-node query) or chunks, and weights or folders that do
not fit are refused. That ``SentenceTransformer.encode`` on them gives ``embed``'s vectors is
tests/commands/test_export.py."""

from __future__ import annotations

import pytest
import torch
from conftest import _topic_texts

from lit_docemb.data import PassageSpec
from lit_docemb.export.forms import exporter
from lit_docemb.export.modules import CoLDEDocumentModule, GraphDocumentModule
from lit_docemb.methods import CoLDE, GraphRoBERTa
from lit_docemb.models import EncoderSpec

TEXTS = [" ".join(t.split()[:80]) for _, t in _topic_texts()[:2]] + ["one short passage"]


@pytest.fixture(scope="module")
def graph_module(tiny_encoder_dir, tmp_path_factory) -> GraphDocumentModule:
    torch.manual_seed(0)
    method = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                          passages=PassageSpec(words_per_passage=20, max_passage_tokens=32))
    [module] = exporter(method).sentence_transformer_modules(tmp_path_factory.mktemp("scratch"))
    return module


def embed(module, texts: list[str], **kwargs) -> torch.Tensor:
    with torch.no_grad():
        return module(module.preprocess(texts, **kwargs))["sentence_embedding"]


def test_a_saved_graph_module_loads_back_to_the_same_vectors(graph_module, tmp_path):
    graph_module.save(str(tmp_path))
    assert {p.name for p in tmp_path.iterdir()} >= {"config.json", "graph.safetensors", "passage_encoder"}
    loaded = GraphDocumentModule.load(str(tmp_path))
    assert loaded.spec == graph_module.spec and loaded.get_embedding_dimension() == 16
    torch.testing.assert_close(embed(loaded, TEXTS), embed(graph_module, TEXTS))
    assert embed(loaded, TEXTS).shape == (3, 16)


def test_a_text_is_a_passage_graph_and_with_task_query_a_single_node(graph_module):
    documents = graph_module.preprocess(TEXTS)
    counts = documents["passage_counts"].tolist()
    assert counts[0] == 4 and counts[2] == 1 and not documents["is_query"].any()  # 80 words, 20 a passage
    assert documents["edges"][0].shape[1] == 4 * 5  # the document node and 4 passages, every pair both ways
    queries = graph_module.preprocess(TEXTS, task="query")
    assert queries["is_query"].all() and all(e.shape == (2, 0) for e in queries["edges"])
    assert not torch.allclose(embed(graph_module, TEXTS[:1], task="query"), embed(graph_module, TEXTS[:1]))


def test_weights_or_a_folder_that_do_not_fit_are_refused(graph_module, tmp_path):
    graph_module.save(str(tmp_path))
    weights = GraphDocumentModule.aggregation_weights(graph_module.model)
    assert weights and not any(k.startswith("encoder.") for k in weights)
    with pytest.raises(ValueError, match="graph.safetensors does not fit"):
        GraphDocumentModule(str(tmp_path / "passage_encoder"), node_dim=16, passages=graph_module.spec,
                            graph_weights=weights | {"extra.weight": torch.zeros(1)})
    with pytest.raises(FileNotFoundError, match="a GraphDocumentModule export is a local folder"):
        GraphDocumentModule.load(str(tmp_path / "missing"))


def test_the_colde_module_saves_no_projection_and_chunks_each_text(no_dropout_encoder_dir, tmp_path):
    torch.manual_seed(0)
    method = CoLDE(EncoderSpec(no_dropout_encoder_dir), chunk_tokens=24, num_heads=2, lstm_output_size=16,
                   projection_size=8, chunk_embeddings=64)
    [module] = exporter(method).sentence_transformer_modules(tmp_path / "scratch")
    weights = CoLDEDocumentModule.aggregation_weights(module.model)
    assert weights and not any(k.startswith(("projection.", "encoder.")) for k in weights)
    features = module.preprocess(TEXTS[:2])
    tokens = module.tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"]
    assert features["chunks_per_section"][0] == -(-len(tokens) // 22)  # 24 tokens a chunk, 2 of them special
    module.save(str(tmp_path / "st"))
    loaded = CoLDEDocumentModule.load(str(tmp_path / "st"))
    torch.testing.assert_close(embed(loaded, TEXTS), embed(module, TEXTS))
    assert embed(loaded, TEXTS).shape == (3, loaded.get_embedding_dimension())
