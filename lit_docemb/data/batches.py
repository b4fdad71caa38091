"""Typed batches: the contract between DataModules (through a method's collator) and methods.

Each method names the batch type its collator produces and its steps consume. Lightning moves dataclass
batches to the device field by field.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class TokenBatch:
    """Padded token ids of N texts.

    Attributes:
        input_ids: (N, T) token ids.
        attention_mask: (N, T) 1 for real tokens, 0 for padding.
    """

    input_ids: Tensor
    attention_mask: Tensor

    def __len__(self) -> int:
        return self.input_ids.shape[0]


@dataclass
class MaskedTokenBatch(TokenBatch):
    """Token ids with some positions masked for masked-language modelling.

    Attributes:
        labels: (N, T) original ids at masked positions, -100 elsewhere.
    """

    labels: Tensor


@dataclass
class ViewPairBatch:
    """Two views of each of B documents: row i of ``view_a`` and row i of ``view_b`` are a positive pair.

    Attributes:
        view_a: (B, T) tokens of the first view.
        view_b: (B, T) tokens of the second view.
        doc_index: (B,) int64 identity of the source document (stable hash of its id), used to mask the same
            document met twice in the gathered batch.
        mlm: optional masked copy of the first views for an auxiliary MLM loss.
        skipped: documents of the incoming list that could not make two views (counted, not silent).
    """

    view_a: TokenBatch
    view_b: TokenBatch
    doc_index: Tensor
    mlm: MaskedTokenBatch | None = None
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.view_a)


@dataclass
class DocumentBatch:
    """Whole documents to embed (prediction, evaluation).

    Attributes:
        tokens: (B, T) tokens of each document (title and body, truncated to the model's length).
        ids: the B document ids, in order.
    """

    tokens: TokenBatch
    ids: list[str]

    def __len__(self) -> int:
        return len(self.tokens)
