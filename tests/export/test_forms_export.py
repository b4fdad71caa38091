"""The export forms (lit_docemb/export/forms.py): which form a method gets (a fine-tuning wrapper its backbone's),
what a method without one is told, the hf folder of a flat encoder, and the files' modes. The round trips through
``python -m lit_docemb export`` are tests/commands/test_export.py."""

from __future__ import annotations

import os

import pytest
import torch
from transformers import AutoModel

from lit_docemb.export.forms import (
    CoLDEExport,
    DocSplitExport,
    ExportError,
    FlatEncoderExport,
    GraphRoBERTaExport,
    export_method,
    exporter,
)
from lit_docemb.data import PassageSpec
from lit_docemb.methods import CTPE, DECA, CoLDE, DocSplit, DocumentClassifier, GraphRoBERTa, SimCSE
from lit_docemb.models import EncoderSpec
from lit_docemb.models.ctpe import WordEmbeddings


def test_each_method_gets_its_form_and_a_wrapper_its_backbones(tiny_encoder_dir):
    spec = EncoderSpec(tiny_encoder_dir, max_length=32)
    graph = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16, passages=PassageSpec(max_passage_tokens=32))
    assert type(exporter(DocSplit(spec))) is DocSplitExport
    assert type(exporter(SimCSE(spec))) is FlatEncoderExport
    assert type(exporter(graph)) is GraphRoBERTaExport
    colde = CoLDE(EncoderSpec(tiny_encoder_dir), chunk_tokens=24, num_heads=2, lstm_output_size=16, projection_size=8,
                  chunk_embeddings=16)
    assert type(exporter(colde)) is CoLDEExport
    wrapped = exporter(DocumentClassifier(graph, labels=["a", "b"]))
    assert type(wrapped) is GraphRoBERTaExport and wrapped.method is graph  # the head is left out


def test_the_hf_form_is_the_trained_encoder_and_its_tokenizer(tiny_encoder_dir, tmp_path):
    torch.manual_seed(0)
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32))
    with torch.no_grad():
        next(method.encoder.backbone.parameters()).add_(1.0)  # trained: no longer the weights it started from
    folder = export_method(method, tmp_path / "hf", "hf")
    saved = AutoModel.from_pretrained(folder)
    for name, value in method.encoder.backbone.state_dict().items():
        assert torch.equal(saved.state_dict()[name], value), name
    assert (folder / "tokenizer.json").is_file()
    with pytest.raises(ValueError, match="format must be 'hf' or 'sentence-transformers'"):
        export_method(method, tmp_path / "onnx", "onnx")
    assert not (tmp_path / "onnx").exists()


def test_methods_without_an_export_are_refused_with_embed_named(tmp_path):
    with pytest.raises(ExportError, match="Doc2VecC.*lit_docemb embed"):
        export_method(DECA(), tmp_path / "deca")
    with pytest.raises(ExportError, match="CTPE.*lit_docemb embed"):
        export_method(CTPE(WordEmbeddings(init="random", dim=8, min_count=1)), tmp_path / "ctpe", "hf")
    assert not (tmp_path / "deca").exists() and not (tmp_path / "ctpe").exists()



@pytest.mark.parametrize("output_format", ["hf", "sentence-transformers"])
def test_exported_files_are_readable_as_the_umask_allows(tiny_encoder_dir, tmp_path, output_format):
    """safetensors stages model.safetensors through mkstemp (mode 0o600): an export is readable like other outputs."""
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64))
    previous = os.umask(0o022)
    try:
        folder = export_method(method, tmp_path / "out", output_format)
    finally:
        os.umask(previous)
    modes = {str(p.relative_to(folder)): p.stat().st_mode & 0o777 for p in folder.rglob("*")}
    assert "model.safetensors" in modes or "encoder/model.safetensors" in modes
    assert {path: mode for path, mode in modes.items() if mode not in (0o644, 0o755)} == {}
