"""Doc2VecC (Chen 2017; DECA eq. 1-3): a document is the mean of its word embeddings.

Word ids are 1..V, 0 is padding. ``U`` (``word_embeddings``) embeds words and documents; ``V``
(``output_embeddings``) scores target words. At inference, eq. 1 exactly: the mean over all words. Training is
Chen's own rule (:mod:`lit_docemb.models.doc2vecc_sgd`): every word of a document is a target of eq. 2, predicted
from its CBOW context and the document vector computed from a corrupted copy of the document (each word kept with
probability ``1 - corruption``, the kept ones reweighted so that the expectation is eq. 1), with negative sampling
from the unigram distribution to the 3/4 power, by sparse SGD whose rate falls linearly over the run.
"""

from __future__ import annotations

import functools
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_docemb.data.core.batches import PackedWords
from lit_docemb.models import doc2vecc_kernels as kernels
from lit_docemb.models.doc2vecc_sgd import noise_table, train_documents


def word_examples(words: Tensor | PackedWords) -> Tensor:
    """A batch's words ((B, T) ids, 0-padded on the right, or packed) → (P, 2) rows (document, position) of every
    word, in reading order."""
    return PackedWords.of(words).positions()


class _SubsetMeans(torch.autograd.Function):
    """Eq. 1 for some documents of a :class:`BatchWords`: embedding_bag forward; backward one sparse product with
    the batch's word-by-document matrix, where embedding_bag's backward sorts every word index at each call."""

    @staticmethod
    def forward(ctx, weight: Tensor, batch: BatchWords, documents: Tensor) -> Tensor:
        ctx.batch = batch
        ctx.save_for_backward(documents)
        chosen = batch.packed.select(documents)
        return F.embedding_bag(chosen.ids, weight, chosen.starts, mode="mean")

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        (documents,) = ctx.saved_tensors
        by_word = ctx.batch.by_word
        dtype = torch.promote_types(grad.dtype, by_word.dtype)  # float32 at least (half sparse products are rare)
        full = grad.new_zeros(by_word.shape[1], grad.shape[1], dtype=dtype).index_add_(0, documents, grad.to(dtype))
        return (by_word.to(dtype) @ full).to(grad.dtype), None, None  # (V + 1, D) from (B, D)


class _NegativeSampling(torch.autograd.Function):
    """Eq. 3 with negative sampling from hidden vectors: (E, D) ``hidden``, ``V``'s weight, (E,) targets and (E, K)
    noise words → (E,) losses, the target's and the noise words' negative log-likelihoods, a noise word equal to
    the target left out as ``doc2vecc.c`` leaves it out. Its own backward, ``V``'s gradient added at the scored rows
    only, by torch's gather, batched product and index_add (:class:`_CompiledSampling` is the same function on the
    CPU in float32: the tests compare them)."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, targets: Tensor, noise: Tensor) -> Tensor:
        ids = torch.cat([targets[:, None], noise], 1)  # (E, 1 + K)
        scores = torch.linalg.vecdot(F.embedding(ids, weight), hidden[:, None])  # (E, 1 + K)
        signs = torch.ones(ids.shape, dtype=hidden.dtype, device=hidden.device)
        signs[:, 1:] = -1.0
        counted = torch.cat([torch.ones_like(targets[:, None], dtype=hidden.dtype),
                             (noise != targets[:, None]).to(hidden.dtype)], 1)
        signed = scores * signs  # s for the target, -s for the noise words
        ctx.save_for_backward(hidden, weight, ids, -signs * counted * torch.sigmoid(-signed))  # d loss / d score
        return -(F.logsigmoid(signed) * counted).sum(1)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, None, None]:
        hidden, weight, ids, slope = ctx.saved_tensors
        scores_grad = slope * grad[:, None]  # (E, 1 + K)
        hidden_grad = torch.bmm(scores_grad[:, None], F.embedding(ids, weight)).squeeze(1)  # (E, D)
        weight_grad = torch.zeros_like(weight).index_add_(0, ids.flatten(),
                                                          (scores_grad[:, :, None] * hidden[:, None]).flatten(0, 1))
        return hidden_grad, weight_grad, None, None


class _CompiledSampling(torch.autograd.Function):
    """:class:`_NegativeSampling` by :mod:`lit_docemb.models.doc2vecc_kernels` (CPU, float32), the scored words
    given as (E, 1 + K) ids: the target, then the noise words."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, scored: Tensor) -> Tensor:
        hidden = hidden.detach().contiguous()
        losses, slopes = hidden.new_empty(len(scored)), hidden.new_empty(scored.shape)
        kernels.sampling_forward(hidden.numpy(), weight.detach().numpy(), scored.numpy(), losses.numpy(),
                                 slopes.numpy())
        ctx.save_for_backward(hidden, weight, scored, slopes)
        return losses

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        hidden, weight, scored, slopes = ctx.saved_tensors
        hidden_grad, weight_grad = torch.empty_like(hidden), torch.zeros_like(weight)
        kernels.scores_backward(hidden.numpy(), weight.detach().numpy(), scored.numpy(),
                                (slopes * grad[:, None]).numpy(), hidden_grad.numpy(), weight_grad.numpy())
        return hidden_grad, weight_grad, None


class _CompiledBag(torch.autograd.Function):
    """:func:`weighted_bag` then dropout, by :mod:`lit_docemb.models.doc2vecc_kernels` (CPU, float32): dropout's mask
    and scale applied in the same pass (``uniforms`` (E, D) at least ``rate`` kept; no dropout with no rows)."""

    @staticmethod
    def forward(ctx, table: Tensor, ids: Tensor, weights: Tensor, uniforms: Tensor, rate: float) -> Tensor:
        out = table.new_zeros(ids.shape[0], table.shape[1])
        kernels.bag_forward(ids.numpy(), weights.numpy(), table.detach().numpy(), uniforms.numpy(), rate, out.numpy())
        ctx.save_for_backward(ids, weights, uniforms)
        ctx.rows, ctx.rate = table.shape[0], rate
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None, None, None]:
        ids, weights, uniforms = ctx.saved_tensors
        table_grad = grad.new_zeros(ctx.rows, grad.shape[1])
        kernels.bag_backward(ids.numpy(), weights.numpy(), grad.contiguous().numpy(), uniforms.numpy(), ctx.rate,
                             table_grad.numpy())
        return table_grad, None, None, None, None


def weighted_bag(table: Tensor, ids: Tensor, weights: Tensor) -> Tensor:
    """(E, D): each row of ``ids`` (E, S) the sum of its words' rows of ``table`` times ``weights`` (E, S), id 0
    (padding) left out and never trained: embedding_bag's weighted sum (:class:`_CompiledBag` on the CPU in
    float32)."""
    return F.embedding_bag(ids, table, per_sample_weights=weights, mode="sum", padding_idx=0)


class BatchWords:
    """A batch's documents packed once for many optimizer steps over subsets of them (DECA's Algorithm 1 reads
    each step's documents from the same batch): their eq. 1 vectors (:meth:`means`) train ``U`` through one
    sparse product with the batch's word-by-document matrix.

    Args:
        words: The batch's words ((B, T) ids, 0-padded on the right, or packed).
        vocabulary_rows: Rows of ``U`` (the vocabulary and the padding row).
    """

    def __init__(self, words: Tensor | PackedWords, vocabulary_rows: int) -> None:
        self.packed = PackedWords.of(words)
        self.vocabulary_rows = vocabulary_rows

    @functools.cached_property
    def by_word(self) -> Tensor:
        """(V + 1, B) sparse: 1/T_i where word w is in document i (eq. 1's share, summed over repeats)."""
        ids, lengths = self.packed.ids, self.packed.lengths
        documents = torch.repeat_interleave(torch.arange(len(lengths), device=ids.device), lengths)
        shares = (1.0 / lengths.clamp(min=1).float())[documents]
        matrix = torch.sparse_coo_tensor(torch.stack([ids, documents]), shares, (self.vocabulary_rows, len(lengths)),
                                         check_invariants=False)  # ids < vocabulary_rows by construction
        with warnings.catch_warnings():  # torch calls its CSR layout beta at each construction
            warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta state")
            return matrix.coalesce().to_sparse_csr()

    @property
    def lengths(self) -> Tensor:
        """(B,) words of each document."""
        return self.packed.lengths

    def means(self, weight: Tensor, documents: Tensor) -> Tensor:
        """Eq. 1 of the documents at rows ``documents`` under the embeddings ``weight``: (N, D), equal to
        embedding_bag's means of ``words[documents]``."""
        return _SubsetMeans.apply(weight, self, documents)


def context_positions(positions: Tensor, window: int, generator: torch.Generator | None = None
                      ) -> tuple[Tensor, Tensor]:
    """The CBOW context of each target position as ``doc2vecc.c`` draws it: ``b`` uniform in ``[0, window)``
    (:func:`draw_shrinks`), the positions ``t - window + b .. t - b`` except ``t`` (see
    :mod:`lit_docemb.models.doc2vecc_sgd`).

    Args:
        positions: (E,) target positions in their documents.

    Returns:
        (E, window + 1) positions (clamped at 0) and the mask of those that are context.
    """
    shrink = draw_shrinks(positions, window, generator)  # (E,)
    a = torch.arange(window + 1)
    context = positions[:, None] - window + a  # (E, window + 1)
    mask = (a >= shrink[:, None]) & (a <= window - shrink[:, None]) & (a != window) & (context >= 0)
    return context.clamp(min=0), mask


def draw_shrinks(positions: Tensor, window: int, generator: torch.Generator | None = None) -> Tensor:
    """(E,) the window's shrink ``b`` of each target, uniform in ``[0, window)``."""
    return torch.randint(0, window, positions.shape, generator=generator)


class Doc2VecC(nn.Module):
    """Doc2VecC's word and output embeddings, its document vector (eq. 1) and its training rule.

    Args:
        vocab_size: Number of words V (ids 1..V; 0 pads).
        dim: Embedding dimension (DECA: 100).
        word_counts: (V,) corpus counts of words 1..V, for the noise distribution of negative sampling; 0 for a
            word that is not in the corpus (DECA's thesaurus words without the dictionary constraint: never noise).
        negative_samples: Noise words per target word (``doc2vecc.c -negative``; DECA Table 2 "#Neg.").
        corruption: Probability of leaving a word out of the training document vector (``doc2vecc.c``'s
            ``-sentence-sample`` is ``1 - corruption``: 0.1 in its published runs, so 0.9).
        window_size: CBOW context window (``-window``; DECA Table 2 "Win. size").
        learning_rate: SGD's starting rate (``-alpha``; 0.05, word2vec's for CBOW), falling linearly to 1e-4 of it.
    """

    def __init__(self, vocab_size: int, dim: int, word_counts: Tensor, negative_samples: int = 5,
                 corruption: float = 0.9, window_size: int = 10, learning_rate: float = 0.05) -> None:
        super().__init__()
        if min(vocab_size, dim, negative_samples, window_size) < 1:
            raise ValueError(f"need vocab_size, dim, negative_samples, window_size >= 1, got {vocab_size}, {dim}, "
                             f"{negative_samples}, {window_size}")
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
        self.noise = noise_table(word_counts.numpy())
        self.noise_ids = torch.from_numpy(self.noise)  # the same table, shared, for the optimizer's reading
        self.negative_samples, self.corruption = negative_samples, corruption
        self.window_size, self.learning_rate = window_size, learning_rate

    def forward(self, words: Tensor | PackedWords) -> Tensor:
        """Eq. 1: the documents' words ((B, T) ids, 0-padded on the right, or packed) → (B, D) mean word
        embeddings (zeros for an empty document)."""
        packed = PackedWords.of(words)
        # the words alone, not the (B, T) padded block: its backward sorts every index, padding included
        return F.embedding_bag(packed.ids, self.word_embeddings.weight, packed.starts, mode="mean")  # (B, D)

    def example_loss(self, words: Tensor | PackedWords, examples: Tensor, sample_words: int, dropout: float,
                     generator: torch.Generator | None = None) -> Tensor:
        """Eq. 2-3 with negative sampling on word-level examples, differentiable (DECA's Algorithm 1 read as
        written: the optimizer trains ``U`` and ``V``, see :class:`~lit_docemb.methods.deca_components.
        Doc2VecCAdamBackbone`). Each example is a target word of a document; its hidden vector is the mean of its
        CBOW context (:func:`context_positions`) and of the document, represented by ``sample_words`` of its words
        drawn uniformly (with replacement), the mean then dropped out at rate ``dropout``.

        Args:
            words: The documents' words ((B, T) ids, 0-padded on the right, or packed).
            examples: (E, 2) rows (document in ``words``, position of the target word).

        Returns:
            (E,) the loss of each example: the target's and the noise words' negative log-likelihoods.
        """
        words = PackedWords.of(words)
        device = words.ids.device  # the draws are made on the CPU (one generator wherever the model is)
        examples = examples.cpu()
        documents, positions = examples[:, 0], examples[:, 1]
        U = self.word_embeddings.weight
        if kernels.compiled(U, words.ids):
            return self._compiled_example_loss(words, documents, positions, sample_words, dropout, generator)
        lengths = words.lengths.cpu()[documents]  # (E,)
        context, mask = context_positions(positions, self.window_size, generator)
        drawn = (torch.rand(len(examples), sample_words, generator=generator) * lengths[:, None]).long()
        noise = self.noise_ids[torch.randint(len(self.noise_ids), (len(examples), self.negative_samples),
                                             generator=generator)].long()  # (E, K)
        documents, positions, context, mask, drawn, noise = (
            t.to(device) for t in (documents, positions, context, mask, drawn, noise))
        share = 1.0 / (mask.sum(1, keepdim=True) + 1)  # (E, 1): the context's words and the document, averaged
        starts = words.starts[documents][:, None]  # (E, 1) where each example's document begins
        bag = torch.cat([words.ids[starts + context] * mask, words.ids[starts + drawn]], 1)
        weights = torch.cat([mask * share, (share / sample_words).expand(-1, sample_words)], 1).to(U.dtype)
        hidden = weighted_bag(U, bag, weights)  # (E, D)
        if self.training and dropout > 0:
            hidden = hidden * (torch.rand(hidden.shape, dtype=hidden.dtype, device=device) >= dropout) / (1 - dropout)
        targets = words.ids[starts[:, 0] + positions]  # (E,)
        return _NegativeSampling.apply(hidden, self.output_embeddings.weight, targets, noise)

    def _compiled_example_loss(self, words: PackedWords, documents: Tensor, positions: Tensor, sample_words: int,
                               dropout: float, generator: torch.Generator | None) -> Tensor:
        """:meth:`example_loss` on the CPU in float32: the same draws in the same order, each example's words, bag
        and scores read by :mod:`lit_docemb.models.doc2vecc_kernels`."""
        count, window = len(documents), self.window_size
        shrink = draw_shrinks(positions, window, generator)
        drawn = torch.rand(count, sample_words, generator=generator)
        noise = torch.randint(len(self.noise_ids), (count, self.negative_samples), generator=generator)
        ids = torch.empty(count, window + 1 + sample_words, dtype=torch.long)
        weights = torch.empty(ids.shape, dtype=torch.float32)
        scored = torch.empty(count, 1 + self.negative_samples, dtype=torch.long)
        kernels.gather_examples(words.ids.contiguous().numpy(), words.lengths.numpy(), words.starts.numpy(),
                                documents.numpy(), positions.numpy(), shrink.numpy(), drawn.numpy(), noise.numpy(),
                                self.noise, ids.numpy(), weights.numpy(), scored.numpy())
        U = self.word_embeddings.weight
        rate = dropout if self.training else 0.0
        uniforms = torch.rand(count, U.shape[1]) if rate > 0 else weights.new_empty(0, 0)
        hidden = _CompiledBag.apply(U, ids, weights, uniforms, rate)  # (E, D)
        return _CompiledSampling.apply(hidden, self.output_embeddings.weight, scored)

    def train_on(self, words: Tensor | PackedWords, progress: tuple[float, float], seed: int, learn: bool = True
                 ) -> Tensor:
        """Chen's rule over the documents of ``words`` ((B, T) ids, 0-padded on the right, or packed), in place on
        ``U`` and ``V``; ``progress`` is the share of the run done before and after this batch (the learning rate's
        schedule). With ``learn=False`` nothing changes (the validation loss). Returns the mean negative-sampling
        loss per target word (0-dim, no gradient)."""
        if self.word_embeddings.weight.device.type != "cpu":
            raise RuntimeError("Doc2VecC trains on the CPU (Chen's sparse SGD): keep the module on the CPU")
        words = PackedWords(*(t.cpu().contiguous() for t in PackedWords.of(words)))
        U, V = self.word_embeddings.weight.detach().numpy(), self.output_embeddings.weight.detach().numpy()
        loss, targets = train_documents(U, V, words.ids.numpy(), words.lengths.numpy(), words.starts.numpy(),
                                        self.noise, self.window_size, self.negative_samples, 1.0 - self.corruption,
                                        self.learning_rate, progress[0], progress[1], seed, learn)
        return torch.tensor(loss / max(targets, 1), dtype=torch.float32)
