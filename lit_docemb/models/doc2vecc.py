"""Doc2VecC (Chen 2017; DECA eq. 1-3): a document is the mean of its word embeddings.

Word ids are 1..V, 0 is padding. ``U`` (``word_embeddings``) embeds words and documents; ``V``
(``output_embeddings``) scores target words. Training follows Doc2VecC: the document vector is computed from a
corrupted copy of the document (each word dropped with probability ``corruption``, the kept ones scaled by
``1 / (1 - corruption)`` so the expectation is eq. 1), and it joins the CBOW context of every target word
(eq. 2: ``v_w^T (U c^t + h)``); the softmax over the vocabulary is replaced by negative sampling from the
unigram distribution to the 3/4 power (word2vec). At inference, eq. 1 exactly: the mean over all words.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Doc2VecC(nn.Module):
    """Doc2VecC's word embeddings, document vector and negative-sampling inputs.

    Args:
        vocab_size: Number of words V (ids 1..V; 0 pads).
        dim: Embedding dimension (DECA: 100).
        word_counts: (V,) corpus counts of words 1..V, for the noise distribution of negative sampling; 0 for a
            word that is not in the corpus (DECA's thesaurus words without the dictionary constraint: never noise).
        negative_samples: Noise words per target word (DECA Table 2 "#Neg.").
        corruption: Probability of dropping a word from the document vector in training (DECA: dropout 0.3).
    """

    def __init__(self, vocab_size: int, dim: int, word_counts: Tensor, negative_samples: int = 5,
                 corruption: float = 0.3) -> None:
        super().__init__()
        if vocab_size < 1 or dim < 1 or negative_samples < 1:
            raise ValueError(f"need vocab_size, dim, negative_samples >= 1, got {vocab_size}, {dim}, {negative_samples}")
        if not 0.0 <= corruption < 1.0:
            raise ValueError(f"corruption must be in [0, 1), got {corruption}")
        if word_counts.shape != (vocab_size,) or (word_counts < 0).any() or not (word_counts > 0).any():
            raise ValueError(f"word_counts must be ({vocab_size},) counts >= 0, one at least positive, got shape "
                             f"{tuple(word_counts.shape)}")
        self.word_embeddings = nn.Embedding(vocab_size + 1, dim, padding_idx=0)  # U
        self.output_embeddings = nn.Embedding(vocab_size + 1, dim, padding_idx=0)  # V
        nn.init.uniform_(self.word_embeddings.weight, -0.5 / dim, 0.5 / dim)  # word2vec's initialisation
        nn.init.zeros_(self.output_embeddings.weight)
        with torch.no_grad():
            self.word_embeddings.weight[0].zero_()
        noise = torch.cat([torch.zeros(1), word_counts.double().pow(0.75)])
        self.register_buffer("noise", (noise / noise.sum()).float(), persistent=False)
        self.negative_samples = negative_samples
        self.corruption = corruption

    def forward(self, words: Tensor) -> Tensor:
        """Eq. 1: (B, T) word ids, 0-padded → (B, D) mean word embeddings (zeros for an empty document)."""
        return self._mean(words, words != 0)

    def corrupted(self, words: Tensor) -> Tensor:
        """The training document vector: (B, T) → (B, D), words dropped with ``corruption``, unbiased."""
        present = words != 0
        if not self.training or self.corruption == 0.0:
            return self._mean(words, present)
        kept = present & (torch.rand(words.shape, device=words.device) >= self.corruption)
        return self._mean(words, kept) / (1.0 - self.corruption)

    def _mean(self, words: Tensor, kept: Tensor) -> Tensor:
        """Sum of the kept words' embeddings over the document's length, without materialising (B, T, D)."""
        weight = self.word_embeddings.weight
        total = F.embedding_bag(words, weight, mode="sum", per_sample_weights=kept.to(weight.dtype),
                                padding_idx=0)  # (B, D)
        return total / (words != 0).sum(1, keepdim=True).clamp(min=1)

    def hidden(self, document: Tensor, contexts: Tensor) -> Tensor:
        """Eq. 2's ``U c^t + h``: (B, D) document vectors and (B, S, C) 0-padded context ids → (B, S, D), with
        ``U c^t`` the mean of the context words' embeddings (word2vec's CBOW mean)."""
        present = (contexts != 0).unsqueeze(-1)
        context = (self.word_embeddings(contexts) * present).sum(2) / present.sum(2).clamp(min=1)  # (B, S, D)
        return context + document.unsqueeze(1)

    def output_vectors(self, targets: Tensor) -> tuple[Tensor, Tensor]:
        """(B, S) target ids → their output vectors (B, S, D) and those of K noise words each (B, S, K, D)."""
        noise = torch.multinomial(self.noise, targets.numel() * self.negative_samples, replacement=True)
        noise = noise.view(*targets.shape, self.negative_samples)  # (B, S, K)
        return self.output_embeddings(targets), self.output_embeddings(noise)
