"""LabelledCollator (lit_docemb/views/classifier.py): the backbone's batch of the labelled documents and their label
indices; a document with a missing or unknown label left out and counted."""

from __future__ import annotations

from lit_docemb.data.core.document import Document, Section
from lit_docemb.views.classifier import LabelledCollator
from lit_docemb.views.common import DocumentCollator


def labelled(doc_id: str, label: str | None) -> Document:
    return Document(doc_id, sections=[Section("", f"Document {doc_id} about tides.")], label=label)


def test_targets_index_the_label_list_and_unlabelled_documents_are_counted(tiny_tokenizer):
    collate = LabelledCollator(DocumentCollator(tiny_tokenizer, 32, with_title=True), labels=["sea", "code", "food"])
    batch = collate([labelled("a", "food"), labelled("b", None), labelled("c", "sea"), labelled("d", "sport"),
                     labelled("e", "code")])
    assert batch.targets.tolist() == [2, 0, 1] and batch.skipped == 2 and len(batch) == 3
    assert batch.inputs.ids == ["a", "c", "e"] and batch.inputs.tokens.input_ids.shape[0] == 3


def test_a_batch_without_a_known_label_is_empty_not_an_error(tiny_tokenizer):
    collate = LabelledCollator(DocumentCollator(tiny_tokenizer, 32, with_title=True), labels=["sea"])
    batch = collate([labelled("a", "x")])
    assert len(batch) == 0 and batch.skipped == 1 and batch.inputs.ids == []
