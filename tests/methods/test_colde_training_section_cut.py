"""CoLDE's ``max_training_section_tokens`` (seed paper 003, Fig. 7, §4.4.2): each section cut to its first tokens in
training batches only; validation, test and predict batches read whole sections."""

from __future__ import annotations

import pytest
import torch
from conftest import _topic_texts

from lit_docemb.data.core.batches import SectionChunkBatch
from lit_docemb.data.core.document import Document, Section
from lit_docemb.errors import BadArgument
from lit_docemb.methods import CoLDE
from lit_docemb.models import EncoderSpec

SMALL = {"chunk_tokens": 12, "num_heads": 2, "lstm_output_size": 16, "projection_size": 8, "chunk_embeddings": 64}
CUT = 25


def long_documents() -> list[Document]:
    texts = [t for _, t in _topic_texts()[:3]]
    return [Document(f"d{i}", "", [Section("", t[:600]), Section("h", t[600:1200])], label=str(i % 2))
            for i, t in enumerate(texts)]


def section_tokens(batch: SectionChunkBatch) -> list[list[int]]:
    """Each section's body ids (its chunks' ids without [CLS]/[SEP]/padding), in order."""
    chunks = batch.sections.chunks
    bodies = [ids[mask.bool()][1:-1].tolist() for ids, mask in zip(chunks.input_ids, chunks.attention_mask,
                                                                    strict=True)]
    counts, sections, start = batch.sections.chunks_per_section.tolist(), [], 0
    for count in counts:
        sections.append([token for body in bodies[start:start + count] for token in body])
        start += count
    return sections


@pytest.fixture(scope="module")
def colde(no_dropout_encoder_dir) -> CoLDE:
    return CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL, max_training_section_tokens=CUT)


def test_training_sections_are_the_first_tokens_of_the_whole_ones(colde):
    docs = long_documents()
    trained, validated = colde.collator("fit")(docs), colde.collator("validate")(docs)
    whole, cut = section_tokens(validated), section_tokens(trained)
    assert len(whole) == len(cut) == 2 * len(docs) and max(map(len, whole)) > CUT
    for full, kept in zip(whole, cut, strict=True):
        assert kept == full[:CUT]
    assert trained.truncated_chunks == 0  # a cut is not a dropped chunk


def test_evaluation_reads_whole_sections(colde, no_dropout_encoder_dir):
    docs = long_documents()
    uncut = CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL)
    for stage in ("validate", "predict"):
        with_cut, without = colde.collator(stage)(docs), uncut.collator(stage)(docs)
        parts = (with_cut.whole, without.whole) if stage == "predict" else (with_cut, without)
        assert torch.equal(parts[0].sections.chunks.input_ids, parts[1].sections.chunks.input_ids), stage
    assert section_tokens(uncut.collator("fit")(docs)) == section_tokens(colde.collator("validate")(docs))


def test_a_cut_below_one_token_is_refused(no_dropout_encoder_dir):
    with pytest.raises(BadArgument, match="max_training_section_tokens"):
        CoLDE(EncoderSpec(no_dropout_encoder_dir), **SMALL, max_training_section_tokens=0)
