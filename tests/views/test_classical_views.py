"""The classical baselines' collator (lit_docemb/views/classical.py): words or sentences with CTPE's preprocessing,
and a key per document that tells apart two documents with one id."""

from __future__ import annotations

from lit_docemb.data.core.document import Document, Section
from lit_docemb.views.classical import WordListCollator, document_key, document_units, document_words

DOC = Document("d1", title="<b>Tidal</b> Pumps",
               sections=[Section("", "A pump moves 42 litres. It floats &amp; sinks!")])


def test_words_are_the_title_and_text_preprocessed_and_sentences_keep_their_words():
    assert document_words(DOC) == ["tidal", "pumps", "a", "pump", "moves", "litres", "it", "floats", "sinks"]
    assert document_units(DOC, "sentences") == ["tidal pumps", "a pump moves litres", "it floats sinks"]


def test_the_key_is_the_id_and_a_hash_of_the_words():
    words = document_words(DOC)
    assert document_key("d1", words) == document_key("d1", list(words))
    assert document_key("d1", words).startswith("d1#") and document_key("d1", words) != document_key("d1", words[1:])


def test_the_collator_gives_units_keys_and_ids_in_order():
    other = Document("d2", sections=[Section("", "Bread rises in the oven.")])
    batch = WordListCollator("words")([DOC, other])
    assert batch.ids == ["d1", "d2"] and batch.words[1] == ["bread", "rises", "in", "the", "oven"]
    assert batch.keys == [document_key("d1", document_words(DOC)), document_key("d2", batch.words[1])]
    assert WordListCollator("sentences")([DOC]).words == [document_units(DOC, "sentences")]
