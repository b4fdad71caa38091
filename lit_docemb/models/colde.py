"""CoLDE's data encoder (seed paper 003, §3.1-3.2) as plain ``nn.Module``s.

Chunks (≤ 512 tokens) of the sections of a batch of documents, flattened, go through a Hugging Face encoder
whose *input embeddings* get a learned section embedding ``S_p`` and chunk embedding ``C_q`` added (Fig. 3);
each chunk is pooled to one vector; a multi-headed chunkwise attention lets the chunks of section p attend to
the chunks of section p + 1; chunk vector and attention output, in chunk order, feed a Bi-LSTM whose final
states (both directions, concatenated: 512) are the section representation ``f(x_l)``; a linear projection
to 256 gives ``z_l`` for the contrastive loss.

Readings where the paper is silent: (1) the last section attends to the first (cyclic), so with two sections
0 → 1 and 1 → 0, and a single section (an unsplit document, at evaluation) attends to itself; (2) "BERT output
along with the chunkwise attention is given sequentially to a Bi-LSTM": the LSTM input is the concatenation
[chunk vector, attention output]; (3) chunk-level similarity (Fig. 4c) uses the Bi-LSTM's output at each chunk
(both directions, 512), the same space as the section representation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

from lit_docemb.data.core.batches import SectionChunks, TokenBatch
from lit_docemb.data.core.tokens import split_rows_by_token_budget, take_rows, token_lengths
from lit_docemb.models.encoder import HFEncoder, pool

Aggregation = Literal["lstm", "mean"]
HeadInit = Literal["random", "identity"]


@dataclass
class EncodedSections:
    """What :class:`CoLDEEncoder` computes for S sections.

    Attributes:
        sections: (S, D_f) section representations ``f(x_l)`` (512 with the Bi-LSTM, the encoder's size with
            mean aggregation).
        projected: (S, D_z) ``Proj(f(x_l))`` for the contrastive loss (``sections`` without a projection).
        chunks: (C, D_f) chunk representations (chunk-level similarity).
        attention: per section, (heads, C_p, C_p+1) chunkwise attention weights (empty list with mean
            aggregation).
    """

    sections: Tensor
    projected: Tensor
    chunks: Tensor
    attention: list[Tensor]


class StructuralEmbeddings(nn.Module):
    """Learned section ``S_p`` and chunk ``C_q`` embeddings added to a chunk's token input embeddings (Fig. 3).

    BERT then adds its own position and token-type embeddings (``T_r``) and normalises, as for any input."""

    def __init__(self, hidden_size: int, max_sections: int, max_chunks_per_section: int, zero: bool = False) -> None:
        super().__init__()
        self.section = nn.Embedding(max_sections, hidden_size)
        self.chunk = nn.Embedding(max_chunks_per_section, hidden_size)
        for table in (self.section, self.chunk):  # BERT's initialiser range, or zero (the encoder's input unchanged)
            nn.init.zeros_(table.weight) if zero else nn.init.normal_(table.weight, std=0.02)

    def forward(self, token_embeddings: Tensor, section_ids: Tensor, chunk_ids: Tensor) -> Tensor:
        for ids, table, what in ((section_ids, self.section, "section"), (chunk_ids, self.chunk, "chunk")):
            if ids.numel() and int(ids.max()) >= table.num_embeddings:
                raise ValueError(f"{what} id {int(ids.max())} beyond the {table.num_embeddings} {what} embeddings: "
                                 f"raise the method's {what} limit or cap the chunks per section")
        extra = self.section(section_ids) + self.chunk(chunk_ids)  # (C, D)
        return token_embeddings + extra[:, None, :].to(token_embeddings.dtype)  # (C, T, D)


class ChunkwiseAttention(nn.Module):
    """Multi-headed chunkwise attention: the chunks of section p (queries) attend to those of section p + 1
    (keys and values); the last section of a document attends to its first (itself when it is alone)."""

    def __init__(self, hidden_size: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(hidden_size, num_heads, dropout=dropout, batch_first=True)

    def forward(self, chunks: list[Tensor], sections_per_document: list[int]) -> tuple[list[Tensor], list[Tensor]]:
        """``chunks``: per section (C_p, D). Returns per section the attention output (C_p, D) and weights
        (heads, C_p, C_p+1)."""
        targets, start = [], 0
        for count in sections_per_document:
            targets += [start + (p + 1) % count for p in range(count)]
            start += count
        queries = pad_sequence(chunks, batch_first=True)  # (S, Cmax, D)
        keys = pad_sequence([chunks[t] for t in targets], batch_first=True)  # (S, Kmax, D)
        key_lengths = torch.tensor([len(chunks[t]) for t in targets], device=queries.device)
        padding = torch.arange(keys.shape[1], device=queries.device)[None, :] >= key_lengths[:, None]  # (S, Kmax)
        out, weights = self.attention(queries, keys, keys, key_padding_mask=padding, need_weights=True,
                                      average_attn_weights=False)  # (S, Cmax, D), (S, H, Cmax, Kmax)
        outputs = [out[s, :len(c)] for s, c in enumerate(chunks)]
        maps = [weights[s, :, :len(c), :len(chunks[targets[s]])] for s, c in enumerate(chunks)]
        return outputs, maps


class CoLDEEncoder(nn.Module):
    """Sections as chunks → section representations (§3.2).

    Args:
        encoder: The chunk encoder (BERT in the paper), pooled per chunk.
        structural_embeddings: Add section and chunk embeddings to the input embeddings (−Aug: off).
        aggregation: ``"lstm"``: chunkwise attention + Bi-LSTM (the paper); ``"mean"``: the mean of the chunk
            vectors, no attention (the −LSTM ablation).
        max_sections: Section ids embedded.
        max_chunks_per_section: Chunk ids embedded.
        num_heads: Heads of the chunkwise attention (paper: 4).
        lstm_output_size: Bi-LSTM output, both directions (paper: 512).
        projection_size: Output of the projection (paper: 256); ``None``: no projection, the loss sees the
            section representations themselves (the −CL ablation's cosine objective).
        chunk_token_budget: Chunks are encoded in sub-batches of at most this many padded tokens.
        head_init: ``"random"``: the paper's aggregator at its default random initialisation. ``"identity"``: a
            section representation is the mean of its chunk vectors at initialisation, so that step 0 scores
            what the pretrained encoder's mean-pooled chunks score: section and chunk embeddings start at zero
            (the encoder's input unchanged) and, with ``aggregation="lstm"``, the representation is the mean of
            the chunk vectors plus a zero-initialised linear map of the Bi-LSTM's final states (a residual form
            of the paper's aggregator whose branch starts silent, as ReZero, Bachlechner et al. 2021, and
            ControlNet's zero convolutions, Zhang et al. 2023); its size is then the encoder's hidden size.
    """

    def __init__(self, encoder: HFEncoder, structural_embeddings: bool = True, aggregation: Aggregation = "lstm",
                 max_sections: int = 5, max_chunks_per_section: int = 64, num_heads: int = 4,
                 lstm_output_size: int = 512, projection_size: int | None = 256, chunk_token_budget: int = 16384,
                 head_init: HeadInit = "random") -> None:
        super().__init__()
        if aggregation not in ("lstm", "mean"):
            raise ValueError(f"aggregation must be 'lstm' or 'mean', got {aggregation!r}")
        if head_init not in ("random", "identity"):
            raise ValueError(f"head_init must be 'random' or 'identity', got {head_init!r}")
        if lstm_output_size % 2:
            raise ValueError(f"lstm_output_size must be even (two directions), got {lstm_output_size}")
        hidden = encoder.hidden_size
        self.encoder = encoder
        self.aggregation = aggregation
        self.chunk_token_budget = chunk_token_budget
        self.head_init = head_init
        self.structure = StructuralEmbeddings(hidden, max_sections, max_chunks_per_section, head_init == "identity") \
            if structural_embeddings else None
        self.residual_output = None
        if aggregation == "lstm":
            self.chunk_attention = ChunkwiseAttention(hidden, num_heads)
            self.lstm = nn.LSTM(2 * hidden, lstm_output_size // 2, batch_first=True, bidirectional=True)
            self.output_size = lstm_output_size
            if head_init == "identity":  # mean of the chunks + this branch, silent at initialisation
                self.residual_output = nn.Linear(lstm_output_size, hidden)
                nn.init.zeros_(self.residual_output.weight)
                nn.init.zeros_(self.residual_output.bias)
                self.output_size = hidden
        else:
            self.output_size = hidden
        self.projection = nn.Identity() if projection_size is None else nn.Linear(self.output_size, projection_size)

    def encode_chunks(self, batch: SectionChunks) -> Tensor:
        """(C, D) pooled chunk vectors, encoded in sub-batches within the token budget."""
        lengths = token_lengths(batch.chunks.attention_mask)
        groups = split_rows_by_token_budget(lengths, self.chunk_token_budget, sort_by_length=True)
        out = None
        for index in groups:
            index = index.to(batch.section_ids.device)
            vectors = self._encode(take_rows(batch.chunks, index), batch.section_ids[index], batch.chunk_ids[index])
            if out is None:
                out = vectors.new_empty(len(lengths), vectors.shape[1])
            out = out.index_copy(0, index, vectors)
        return out

    def _encode(self, tokens: TokenBatch, section_ids: Tensor, chunk_ids: Tensor) -> Tensor:
        backbone = self.encoder.backbone
        embeddings = backbone.get_input_embeddings()(tokens.input_ids)  # (C, T, D)
        if self.structure is not None:
            embeddings = self.structure(embeddings, section_ids, chunk_ids)
        hidden = backbone(inputs_embeds=embeddings, attention_mask=tokens.attention_mask).last_hidden_state
        return pool(hidden, tokens.attention_mask, self.encoder.pooling)  # (C, D)

    def forward(self, batch: SectionChunks, sections_per_document: list[int]) -> EncodedSections:
        """Section (and chunk) representations; ``sections_per_document`` lists how many consecutive sections
        of ``batch`` each document has (they attend to each other). S may be 0 (see :func:`_one_dummy_section`)."""
        if len(batch) == 0:
            out = self.forward(_one_dummy_section(batch), [1])
            return EncodedSections(out.sections[:0], out.projected[:0], out.chunks[:0], [])
        vectors = self.encode_chunks(batch)  # (C, D)
        per_section = list(torch.split(vectors, batch.chunks_per_section.tolist()))
        if self.aggregation == "mean":
            sections = torch.stack([c.mean(0) for c in per_section])  # (S, D)
            return EncodedSections(sections, self.projection(sections), vectors, [])
        attended, maps = self.chunk_attention(per_section, sections_per_document)
        inputs = pad_sequence([torch.cat([c, a], -1) for c, a in zip(per_section, attended)], batch_first=True)
        packed = pack_padded_sequence(inputs.float(), batch.chunks_per_section.cpu(), batch_first=True,
                                      enforce_sorted=False)  # (S, Cmax, 2D)
        with torch.autocast(inputs.device.type, enabled=False):  # fp32: tiny next to the encoder, and CPU
            outputs, (final, _) = self.lstm(packed)  # bf16 LSTMs fail without a graph; final: (2, S, D_f/2)
        sections = torch.cat([final[0], final[1]], -1)  # (S, D_f)
        padded, _ = pad_packed_sequence(outputs, batch_first=True)  # (S, Cmax, D_f)
        chunks = torch.cat([padded[s, :n] for s, n in enumerate(batch.chunks_per_section.tolist())])  # (C, D_f)
        if self.residual_output is not None:  # head_init identity: (S, D) and (C, D), the chunks' mean at step 0
            sections = torch.stack([c.mean(0) for c in per_section]) + self.residual_output(sections).to(vectors.dtype)
            chunks = vectors + self.residual_output(chunks).to(vectors.dtype)
        return EncodedSections(sections, self.projection(sections), chunks, maps)


def _one_dummy_section(batch: SectionChunks) -> SectionChunks:
    """A one-token, one-chunk section standing in for an empty batch, so that every weight still takes part in
    the backward pass (DDP) and the loss's collectives still run (as ``HFEncoder`` does for empty batches)."""
    ids = batch.chunks.input_ids.new_zeros(1, 1)
    zero = batch.section_ids.new_zeros(1)
    return SectionChunks(TokenBatch(ids, torch.ones_like(ids)), zero, zero.clone(), zero + 1)
