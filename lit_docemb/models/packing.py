"""Packed (padding-free) encoding for BERT-family encoders: the real tokens of a padded batch laid end to end in
one row, each sequence attending only to itself.

A padded batch (B, T) costs every layer B x T tokens; packed, the embeddings, projections and feed-forward
layers see only the N real tokens, and attention runs per sequence from their boundaries ``cu_seq_lens``
(B + 1 offsets). Positions restart at every sequence and token types are carried over, so a packed sequence is
encoded as in the padded batch.

The attention goes through transformers' attention interface under the name :data:`PACKED_ATTENTION`: calls
with ``cu_seq_lens_q`` get the packed kernel, other calls (the padded ones) are PyTorch's SDPA as with
``attn_implementation="sdpa"``. The packed kernel is ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention
over variable lengths, no padding in attention either) for fp16/bf16 tensors on CUDA; elsewhere (CPU, fp32)
the sequences are laid out padded for SDPA in attention only, which is the padded path's attention exactly.
Neither applies dropout to the attention probabilities (``varlen_attn`` has none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

#: The attention implementation registered with transformers for packed encoding.
PACKED_ATTENTION = "lit_docemb_packed"

#: ``config.model_type`` of the encoders whose layers are checked to encode packed batches as padded ones
#: (``tests/methods/test_packed_encoding.py``): BERT's layer structure with absolute positions.
PACKED_MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "camembert", "electra")

try:
    from torch.nn.attention.varlen import varlen_attn
except ImportError:  # torch before 2.10
    varlen_attn = None


@dataclass(frozen=True)
class PackedLayout:
    """Where the real tokens of a padded (B, T) batch go in the packed row of N tokens.

    Attributes:
        index: (N,) positions of the real tokens in the flattened (B * T) batch, row by row.
        columns: (N,) each real token's column in its row (its position in the padded batch).
        cu_seq_lens: (B + 1,) int32 offsets of the sequences in the packed row.
        max_length: Longest sequence (tokens).
        batch_size: B.
        width: T.
    """

    index: Tensor
    columns: Tensor
    cu_seq_lens: Tensor
    max_length: int
    batch_size: int
    width: int

    @classmethod
    def from_mask(cls, attention_mask: Tensor) -> PackedLayout:
        """The layout of the tokens where ``attention_mask`` (B, T) is set. One host synchronisation (the
        sequence lengths); every row needs at least one token."""
        batch_size, width = attention_mask.shape
        mask = attention_mask.bool()
        lengths = mask.sum(1)  # (B,)
        lengths_host = lengths.cpu()
        if batch_size and int(lengths_host.min()) == 0:
            raise ValueError("packed encoding needs at least one token in every row of the attention mask")
        total = int(lengths_host.sum())
        index = torch.nonzero_static(mask.flatten(), size=total).squeeze(1)  # (N,), no second synchronisation
        cu_seq_lens = F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))  # (B + 1,)
        return cls(index, index % width, cu_seq_lens, int(lengths_host.max()) if batch_size else 0, batch_size,
                   width)

    def pack(self, values: Tensor) -> Tensor:
        """(B, T, ...) values of the padded batch -> (N, ...) values of its real tokens."""
        return values.flatten(0, 1)[self.index]

    def unpack(self, packed: Tensor) -> Tensor:
        """(N, ...) values of the real tokens -> (B, T, ...), zeros at the padding."""
        padded = packed.new_zeros(self.batch_size * self.width, *packed.shape[1:])
        return padded.index_copy(0, self.index, packed).unflatten(0, (self.batch_size, self.width))


def position_offset(embeddings: nn.Module) -> int:
    """The position id of a sequence's first token: RoBERTa-style embeddings count positions from
    ``padding_idx + 1`` (``create_position_ids_from_input_ids``), BERT-style ones from 0."""
    if hasattr(type(embeddings), "create_position_ids_from_input_ids"):
        return int(embeddings.padding_idx) + 1
    return 0


def packed_attention(module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                     dropout: float = 0.0, scaling: float | None = None, cu_seq_lens_q: Tensor | None = None,
                     max_length_q: int | None = None, **kwargs) -> tuple[Tensor, None]:
    """transformers' attention interface for :data:`PACKED_ATTENTION`.

    Args:
        module: The attention layer calling.
        query: (1, H, N, d) for a packed call, (B, H, T, d) for a padded one; ``key`` and ``value`` alike.
        attention_mask: The padded call's mask (``None`` for a packed call).
        dropout: Attention dropout of a padded call (packed calls apply none).
        scaling: Factor of the attention scores (``None``: 1 / sqrt(d)).
        cu_seq_lens_q: (B + 1,) int32 sequence offsets of a packed call; ``None`` for a padded call.
        max_length_q: Longest sequence of a packed call.
        **kwargs: Passed on to SDPA for a padded call.

    Returns:
        The attention output (1, N, H, d) or (B, T, H, d), and no attention weights.
    """
    if cu_seq_lens_q is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    query, key, value = (x[0].transpose(0, 1) for x in (query, key, value))  # (N, H, d) each
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    if use_varlen_kernel(query):
        # varlen_attn scales by 1 / sqrt(d) (the argument to change it is not in every torch version)
        query = query * (scaling * math.sqrt(query.shape[-1])) if scaling != query.shape[-1] ** -0.5 else query
        output = varlen_attn(query.contiguous(), key.contiguous(), value.contiguous(), cu_seq_lens_q,
                             cu_seq_lens_q, max_length_q, max_length_q)
    else:
        output = padded_sequence_attention(query, key, value, cu_seq_lens_q, max_length_q, scaling)
    return output.unsqueeze(0), None  # (1, N, H, d)


def use_varlen_kernel(query: Tensor) -> bool:
    """Whether packed attention runs FlashAttention over variable lengths: fp16/bf16 on CUDA, torch >= 2.10."""
    return varlen_attn is not None and query.is_cuda and query.dtype in (torch.float16, torch.bfloat16)


def padded_sequence_attention(query: Tensor, key: Tensor, value: Tensor, cu_seq_lens: Tensor, max_length: int,
                              scaling: float) -> Tensor:
    """Attention within each packed sequence, computed by SDPA on the sequences padded to ``max_length``: the
    padded path's attention, for devices and dtypes without a variable-length kernel. (N, H, d) in and out."""
    tokens, heads, head_size = query.shape
    batch_size = cu_seq_lens.numel() - 1
    lengths = cu_seq_lens.diff()
    rows = torch.repeat_interleave(torch.arange(batch_size, device=query.device), lengths, output_size=tokens)
    columns = torch.arange(tokens, device=query.device) - cu_seq_lens[rows]  # (N,)

    def padded(x: Tensor) -> Tensor:  # (N, H, d) -> (B, H, max_length, d)
        grid = x.new_zeros(batch_size, max_length, heads, head_size)
        return grid.index_put((rows, columns), x).transpose(1, 2)

    keep = torch.zeros(batch_size, max_length, dtype=torch.bool, device=query.device)
    keep[rows, columns] = True
    output = F.scaled_dot_product_attention(padded(query), padded(key), padded(value),
                                            attn_mask=keep[:, None, None, :], scale=scaling)  # (B, H, max_length, d)
    return output.transpose(1, 2)[rows, columns]  # (N, H, d)


AttentionInterface.register(PACKED_ATTENTION, packed_attention)
AttentionMaskInterface.register(PACKED_ATTENTION, sdpa_mask)  # padded calls: SDPA's mask
