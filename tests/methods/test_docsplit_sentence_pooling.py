"""DocSplit's ``sentence_pooling`` (DECA's BERT-ST baseline, seed paper 002 §4.1): a document embedded as the sum (or
mean) of its sentences' vectors, each sentence encoded alone, checked against a naive reference that tokenizes and
encodes every sentence by itself."""

from __future__ import annotations

import pytest
import torch

from lit_docemb.export.forms import ExportError, exporter
from lit_docemb.data.core.batches import DocumentSentencesBatch
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.text import split_sentences
from lit_docemb.errors import BadArgument
from lit_docemb.eval.embedding import embed_documents
from lit_docemb.methods.docsplit import DocSplit
from lit_docemb.models import EncoderSpec

DOCUMENTS = [
    Document(id="tides", title="", sections=[
        Section("", "The tide rises twice a day. The moon pulls the water. Sailors watch the charts."),
        Section("Causes", "Gravity of the sun also matters. Spring tides are the largest.")]),
    Document(id="one", title="", sections=[Section("", "A single short sentence about rivers and their banks")]),
    Document(id="word", title="", sections=[Section("", "Rivers")]),
]


@pytest.fixture(scope="module")
def methods(no_dropout_encoder_dir) -> dict[str, DocSplit]:
    made = {}
    for pooling in ("none", "sum", "mean"):
        torch.manual_seed(0)
        made[pooling] = DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=32), mlm_weight=0.0,
                                 embed_with_title=False, sentence_pooling=pooling).eval()
    return made


def naive_sentence_vectors(method: DocSplit, document: Document) -> torch.Tensor:
    """(S, D) [CLS] of each sentence tokenized and encoded on its own; a document of fewer than two words is one
    text."""
    sentences = [s for section in document.sections for s in split_sentences(section.text)] or [document.text]
    vectors = []
    with torch.no_grad():
        for sentence in sentences:
            tokens = method.tokenizer(sentence, max_length=32, truncation=True, return_tensors="pt")
            vectors.append(method.encoder(tokens["input_ids"], tokens["attention_mask"])[0])
    return torch.stack(vectors)


def test_sum_and_mean_equal_encoding_each_sentence_alone(methods):
    for pooling, reduce in (("sum", torch.sum), ("mean", torch.mean)):
        embedded = embed_documents(methods[pooling], DOCUMENTS, batch_size=2)  # (3, D), two batches
        expected = torch.stack([reduce(naive_sentence_vectors(methods[pooling], d), dim=0) for d in DOCUMENTS])
        torch.testing.assert_close(embedded, expected, atol=1e-5, rtol=1e-5)
    assert naive_sentence_vectors(methods["sum"], DOCUMENTS[0]).shape[0] == 5


def test_the_collator_keeps_one_row_per_sentence(methods):
    batch = methods["sum"].collator("predict")(DOCUMENTS)
    assert isinstance(batch, DocumentSentencesBatch) and batch.ids == ["tides", "one", "word"]
    assert batch.sentence_counts.tolist() == [5, 1, 1] and len(batch.sentences) == 7
    first = batch.sentences.input_ids[0, :int(batch.sentences.attention_mask[0].sum())].tolist()
    assert methods["sum"].tokenizer.decode(first, skip_special_tokens=True) == "the tide rises twice a day."


def test_none_reads_the_whole_document_and_differs_from_the_sum(methods):
    whole = embed_documents(methods["none"], DOCUMENTS[:1])
    summed = embed_documents(methods["sum"], DOCUMENTS[:1])
    text = methods["none"].tokenizer(DOCUMENTS[0].text, max_length=32, truncation=True, return_tensors="pt")
    with torch.no_grad():
        expected = methods["none"].encoder(text["input_ids"], text["attention_mask"])
    torch.testing.assert_close(whole, expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(whole, summed, atol=1e-3)


def test_a_title_cannot_be_pooled_and_no_export_pretends_to(methods, no_dropout_encoder_dir):
    with pytest.raises(BadArgument, match="embed_with_title"):
        DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=32), mlm_weight=0.0, sentence_pooling="sum")
    with pytest.raises(BadArgument, match="sentence_pooling"):
        DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=32), mlm_weight=0.0, embed_with_title=False,
                 sentence_pooling="max")
    with pytest.raises(ExportError, match="lit_docemb embed"):
        exporter(methods["sum"])
    exporter(methods["none"])


def test_a_batch_of_single_cut_sentences_is_named_in_one_warning(no_dropout_encoder_dir, caplog):
    """DECA's BERT-ST on a cleaned corpus (no full stops): each document one "sentence" cut at max_length, so the
    row would be the encoder cut at max_length; one warning names it, documents with sentence ends raise none."""
    method = DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=16), mlm_weight=0.0, embed_with_title=False,
                      sentence_pooling="sum").eval()
    cleaned = [Document(id=f"c{i}", sections=[Section("", " ".join(["river bank water"] * 20))]) for i in range(3)]
    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "lit_docemb.methods.docsplit"]

    with caplog.at_level("WARNING", logger="lit_docemb.methods.docsplit"):
        embed_documents(method, DOCUMENTS, batch_size=3)
        assert not warnings()
        embed_documents(method, cleaned, batch_size=3)
        embed_documents(method, cleaned, batch_size=3)
    assert len(warnings()) == 1 and "text_gcn_corpus: raw" in warnings()[0]


def test_a_text_without_punctuation_is_one_sentence_so_bert_st_is_the_bert_row(methods):
    """text_gcn's raw R8/R52 are the all-terms Reuters release (lower-cased, no punctuation, a document a line): the
    sum of sentence vectors is then one [CLS] of the text cut at max_length, the BERT row (docs/reproduce.md)."""
    reuters = [Document(id=f"r{i}", title="", sections=[Section("", text)]) for i, text in enumerate([
        "champion products ch approves stock split champion products inc said its board of directors approved a "
        "two for one stock split of its common shares for shareholders of record as of april the company also said "
        "its board voted to recommend to shareholders at the annual meeting april an increase in the authorized "
        "capital stock from five mln to mln shares reuter",
        "computer terminal systems cpml completes sale computer terminal systems inc said it has completed the sale "
        "of shares of its common stock reuter"])]
    assert all(len(split_sentences(d.text)) == 1 for d in reuters)
    bert_st = embed_documents(methods["sum"], reuters, batch_size=2)
    bert = embed_documents(methods["none"], reuters, batch_size=2)
    torch.testing.assert_close(bert_st, bert, atol=1e-5, rtol=1e-5)
