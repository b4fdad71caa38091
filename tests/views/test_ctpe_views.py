"""CTPE's views (lit_docemb/views/ctpe.py): splitting a document at its fields or a token ratio, TF-IDF neighbours
and partner sampling, and coupled pairs from cached field ids equal to those from the text."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from corpus_files import clustered_documents

from lit_docemb.data.core.document import Document, Section
from lit_docemb.models.ctpe_tokenizers import WordTokenizer
from lit_docemb.views.ctpe import PartnerSampler, check_pos, split_ids, tfidf_neighbours

PATENT = Document("p1", title="Tidal pump", sections=[
    Section("Abstract", "A pump driven by tides moves water."),
    Section("Claims", "A pump comprising a float and a valve."),
])
TOKENIZER = WordTokenizer.from_texts(["tidal pump a driven by tides moves water comprising float and valve"])


def words(ids: list[int]) -> list[str]:
    return [TOKENIZER.words[i] for i in ids]



def test_split_at_fields_and_token_ratios():
    former, latter = split_ids(PATENT, "title", TOKENIZER.encode, max_length=200)
    assert words(former) == ["tidal", "pump"]
    assert words(latter) == "a pump driven by tides moves water a pump comprising a float and a valve".split()
    former, latter = split_ids(PATENT, "before:claims", TOKENIZER.encode, max_length=200)
    assert words(former) == "tidal pump a pump driven by tides moves water".split()
    assert words(latter) == "a pump comprising a float and a valve".split()
    all_ids = TOKENIZER.encode("Tidal pump " + PATENT.text)  # 17 tokens
    former, latter = split_ids(PATENT, 0.2, TOKENIZER.encode, max_length=200)
    assert former + latter == all_ids and len(former) == round(0.2 * 17) == 3
    former, latter = split_ids(PATENT, 0.8, TOKENIZER.encode, max_length=4)  # each part cut to l_max
    assert former == all_ids[:4] and latter == all_ids[14:]



def test_arxiv_title_section_is_the_title_and_unsplittable_documents_give_none():
    arxiv = Document("a", title="Tidal pump", sections=[Section("Title", "Tidal pump"),
                                                        Section("Abstract", "Tides move water.")])
    former, latter = split_ids(arxiv, "title", TOKENIZER.encode, 200)
    assert words(former) == ["tidal", "pump"] and words(latter) == ["tides", "[UNK]", "water"]  # "move" is unknown
    assert split_ids(arxiv, "before:claims", TOKENIZER.encode, 200) is None  # no such boundary
    untitled = Document("u", sections=[Section("", "Tides move water.")])
    assert split_ids(untitled, "title", TOKENIZER.encode, 200) is None
    assert split_ids(Document("w", sections=[Section("", "pump")]), 0.5, TOKENIZER.encode, 200) is None
    for bad in [0.0, 1.0, "middle", "before:", True]:
        with pytest.raises(ValueError, match="pos: "):
            check_pos(bad)



def test_tfidf_neighbours_and_sampling_draw_only_from_the_neighbour_list():
    docs = clustered_documents()
    texts = [d.title + " " + d.text for d in docs]
    neighbours = tfidf_neighbours(texts, k=4)
    assert neighbours.shape == (18, 4)
    for row, found in enumerate(neighbours):
        assert row not in found
        assert {r // 6 for r in found} == {row // 6}  # a document's neighbours share its topic
    sampler = PartnerSampler(docs, [d.id for d in docs], neighbours, neighbour_probability=1.0)
    generator = torch.Generator().manual_seed(0)
    for row, doc in enumerate(docs):
        drawn = {sampler.partner_row(doc.id, generator) for _ in range(40)}
        assert drawn == set(neighbours[row].tolist())  # only, and all of, the list
    mixed = PartnerSampler(docs, [d.id for d in docs], neighbours)  # §4.7: half neighbours, half uniform
    rows = [mixed.partner_row("sea0", generator) for _ in range(4000)]
    assert 0 not in rows
    share = np.isin(rows, neighbours[0]).mean()
    assert share == pytest.approx(0.5 + 0.5 * 4 / 17, abs=0.03)
    assert tfidf_neighbours(texts[:3], k=100).shape == (3, 2)



def test_uniform_partners_cover_the_corpus_but_never_the_document():
    docs = clustered_documents(2)
    sampler = PartnerSampler(docs, [d.id for d in docs])
    generator = torch.Generator().manual_seed(1)
    drawn = [sampler.partner_row("sea1", generator) for _ in range(600)]
    assert set(drawn) == set(range(6)) - {1}
    assert PartnerSampler(docs[:1], ["sea0"]).partner_row("sea0", generator) is None



def mixed_documents() -> list[Document]:
    """Clustered documents plus ones some splits must skip (no abstract heading, an empty body, one word) and HTML
    with escapes."""
    return clustered_documents(4) + [
        Document("no_abstract", title="Lone title", sections=[Section("Claims", "a float and a valve")]),
        Document("empty_body", title="Empty body", sections=[Section("Abstract", "")]),
        Document("html", title="<b>Ocean</b> &amp; tide", sections=[Section("Abstract", "wave <i>salt</i> ship"),
                                                                   Section("Claims", "bread &lt; oven")]),
        Document("one_word", sections=[Section("Abstract", "a")]),
    ]



@pytest.mark.parametrize("pos", ["title", 0.5, "before:claims"])
@pytest.mark.parametrize("words", [True, False])
def test_views_from_cached_field_ids_are_the_views_from_text(pos, words, tiny_encoder_dir, tmp_path):
    """Issue 23 item 1: the fields are tokenised once into the Arrow cache; the same seeds give the same batches
    (pairs, partners, sides, skipped counts) from the cached ids as from the documents' text, a document the cache
    lacks read from its text."""
    from lit_docemb.data.caches.field_cache import FieldRows, FieldTokenCache
    from lit_docemb.models.ctpe_tokenizers import HFTokenIds
    from lit_docemb.views.ctpe import CoupledPairCollator, FieldIds, PairSplitter

    docs = mixed_documents()
    tokenizer = WordTokenizer.from_texts([d.title + " " + d.text for d in docs]) if words else \
        HFTokenIds(tiny_encoder_dir)
    rows = FieldRows(FieldTokenCache(FieldIds(tokenizer), str(tmp_path)).open(docs[:-1]))  # one left to the text
    assert all(rows.get(d.id) is not None for d in docs[:-1]) and rows.get(docs[-1].id) is None
    ids = [d.id for d in docs]
    for deterministic in (False, True):
        text_collate, cached_collate = (CoupledPairCollator(PairSplitter(tokenizer, pos, 9, cached),
                                                            PartnerSampler(docs, ids), 0, deterministic)
                                        for cached in (None, rows))
        for seed in range(4):
            batches = []
            for collate in (text_collate, cached_collate):
                torch.manual_seed(seed)
                batches.append(collate(docs))
            text, cached = batches
            assert text.skipped == cached.skipped and text.skipped >= 1  # the unsplittable ones
            for field in ("former", "latter", "negative_former", "negative_latter"):
                assert torch.equal(getattr(text, field).input_ids, getattr(cached, field).input_ids), (seed, field)
                assert torch.equal(getattr(text, field).attention_mask, getattr(cached, field).attention_mask)
