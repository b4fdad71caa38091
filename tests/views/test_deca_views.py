"""DECA's views (lit_docemb/views/deca.py) apart from the augmentations (tests/methods/test_deca.py): the word
index, in-vocabulary word rows (against a per-document reference), per-word draws that depend on the document
alone, and the Doc2VecC and word-document collators."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lit_docemb.augment import Vocabulary
from lit_docemb.data.core.document import Document, Section, doc_index
from lit_docemb.views.deca import (
    CHARS_PER_WORD,
    Doc2VecCCollator,
    WordDocumentCollator,
    leading_words,
    rows_of_words,
    word_draws,
    word_index,
)

VOCABULARY = Vocabulary.from_texts(["tide tide tide ship ship salt wave", "ship oven oven"])


def test_the_index_keeps_the_most_frequent_words_ties_by_word_from_id_1():
    assert word_index(VOCABULARY, min_count=1, max_vocabulary=3) == {"ship": 1, "tide": 2, "oven": 3}
    assert word_index(VOCABULARY, min_count=2, max_vocabulary=10) == {"ship": 1, "tide": 2, "oven": 3}
    assert set(word_index(VOCABULARY, min_count=1, max_vocabulary=10)) == {"tide", "ship", "salt", "wave", "oven"}
    with pytest.raises(ValueError, match="min_word_count=4"):
        word_index(VOCABULARY, min_count=4, max_vocabulary=10)


@pytest.mark.parametrize("max_words", [1, 3, 10])
def test_rows_of_words_are_each_documents_non_zero_values_cut_and_packed(max_words):
    rng = np.random.default_rng(0)
    lengths = np.array([4, 0, 7, 2])
    values = rng.integers(0, 4, size=int(lengths.sum()))  # 0: a word the index lacks
    starts = np.cumsum(lengths) - lengths
    expected = [[v for v in values[s:s + n] if v][:max_words] for s, n in zip(starts, lengths)]
    rows = rows_of_words(values, lengths, max_words)
    assert rows.lengths.tolist() == [len(e) for e in expected]
    assert [rows.ids[s:s + n].tolist() for s, n in zip(rows.starts, rows.lengths)] == expected
    assert rows.padded().shape == (4, max(1, max(len(e) for e in expected)))
    empty = rows_of_words(np.zeros(0, dtype=np.int64), np.array([0, 0]), 5)
    assert empty.lengths.tolist() == [0, 0] and empty.padded().shape == (2, 1)


def test_a_documents_draws_follow_its_seed_and_word_positions_whatever_its_batch():
    alone = word_draws(["d2"], np.array([3]))
    batch = word_draws(["d1", "d2"], np.array([5, 3]))
    assert alone.shape == (2, 3) and batch.shape == (2, 8)
    assert np.array_equal(batch[:, 5:], alone) and not np.array_equal(batch[:, :3], alone)
    assert ((batch >= 0) & (batch < 1)).all() and not np.array_equal(batch[0], batch[1])


def test_doc2vecc_batches_hold_in_vocabulary_ids_and_skip_documents_of_fewer_than_two():
    index = word_index(VOCABULARY, min_count=1, max_vocabulary=10)
    docs = [Document("a", title="Tide", sections=[Section("", "The ship, salt and more ship.")]),
            Document("b", sections=[Section("", "Only oven here.")]),
            Document("c", sections=[Section("", "tide " * 20)])]
    collate = Doc2VecCCollator(index, max_words=4, deterministic=True)
    batch = collate(docs)
    assert batch.words.padded().tolist() == [[index[w] for w in ("tide", "ship", "salt", "ship")], [index["tide"]] * 4]
    assert batch.doc_index.tolist() == [doc_index("a"), doc_index("c")] and batch.skipped == 1
    kept = [collate.kept_item(doc) for doc in docs]  # what the loaders keep from one epoch to the next
    assert [k.id for k in kept] == ["a", "b", "c"]
    assert [torch.equal(a, b) for a, b in zip(collate(kept).words, batch.words)] == [True] * 3


def test_the_embedding_batch_keeps_every_document_and_reads_only_its_leading_characters():
    index = word_index(VOCABULARY, min_count=1, max_vocabulary=10)
    far = Document("far", sections=[Section("", "x" * (2 * CHARS_PER_WORD) + " wave")])
    assert leading_words(far, max_words=2) == ["x" * (2 * CHARS_PER_WORD)]  # "wave" lies past the cut
    batch = WordDocumentCollator(index, max_words=2)([far, Document("w", sections=[Section("", "wave oven")])])
    assert batch.ids == ["far", "w"] and batch.words.padded().tolist() == [[0, 0], [index["wave"], index["oven"]]]
