"""DECA's typed config components: the backbone (Doc2VecC or a Hugging Face encoder) and the framework (SimCLR,
SimSiam, Table 5's "-Contrastive" append, or Doc2VecC alone for the baseline rows). Each holds only the arguments
that apply to it, so that a config cannot combine, say, NT-Xent's temperature with SimSiam; the augmentations are
:mod:`lit_docemb.augment.specs`.

A config names one with ``class_path`` / ``init_args``; a framework's ``draws_augmentation`` says whether DECA draws
an augmentation for it (and so takes an ``augmentation``); ``problems`` lists out-of-range values for
:class:`~lit_docemb.methods.deca.DECA` to raise as a :class:`~lit_docemb.errors.ConfigError` under the full key.
"""

from __future__ import annotations

import inspect
from typing import Literal

from lit_docemb.models import EncoderSpec

#: Words of a document that the corpus vocabulary (augmentation candidates, TF-IDF) reads with an encoder backbone
#: (a Doc2VecC backbone reads its ``max_words``).
ENCODER_VOCABULARY_WORDS = 10_000


def _at_least_one(**values: int) -> dict[str, str]:
    return {k: f"must be >= 1, got {v}" for k, v in values.items() if v < 1}


class Doc2VecCBackbone:
    """Doc2VecC (eq. 1-3) trained as Chen (2017) trains it -- her ``doc2vecc.c``'s rule, every word of every
    document a target, sparse SGD (:mod:`lit_docemb.models.doc2vecc_sgd`) -- jointly with the contrastive loss
    (eq. 6), whose gradient the configured optimizer applies. Defaults are ``doc2vecc.c``'s published runs
    (``-cbow 1 -size 100 -negative 5 -sentence-sample 0.1 -min-count 10``) and DECA Table 2's most common window.

    Reading of DECA's Table 2 and Appendix A.3.2: "#Sample" has no counterpart in Chen's program (which trains on
    every word, as eq. 3 sums over t = 1..T_i) and is not used: sampling a few targets per document and step was
    what left the Doc2VecC row six times worse than the program. "Dropout ratio 0.3" does not say it is Doc2VecC's
    corruption; on R8 a corruption of 0.3 and the program's 0.9 give the same error (docs/reproduce.md#deca), and
    0.9 costs half the CPU time, so the default is the program's.
    :class:`Doc2VecCAdamBackbone` is the other reading, Algorithm 1 as written, where both have a meaning.

    Args:
        embedding_dim: Dimension of the word and document vectors (100).
        window_size: CBOW context window (Table 2 "Win. size"; ``-window``; 10).
        negative_samples: Noise words per target (Table 2 "#Neg."; 5).
        corruption: Probability of leaving a word out of the training document vector (``1 - sentence-sample``;
            0.9).
        learning_rate: Starting rate of Doc2VecC's SGD (``-alpha``; 0.05), falling linearly over the run to 1e-4 of
            it; the optimizer's rate is the contrastive loss's.
        min_word_count: Corpus count a word needs to be in the Doc2VecC vocabulary (``-min-count``).
        max_vocabulary: Most frequent words kept in the Doc2VecC vocabulary.
        max_words: Words read per document.
        keep_empty: ``predict`` (and so ``embed``) also returns the all-zero vector of a document with no
            word of the vocabulary; by default such documents are left out and counted
            (``empty_documents`` in ``embed_stats.json``). Evaluation always represents them (zero rows).
    """

    def __init__(self, embedding_dim: int = 100, window_size: int = 10, negative_samples: int = 5,
                 corruption: float = 0.9, learning_rate: float = 0.05, min_word_count: int = 10,
                 max_vocabulary: int = 100_000, max_words: int = 10_000, keep_empty: bool = False) -> None:
        self.embedding_dim, self.window_size, self.negative_samples = embedding_dim, window_size, negative_samples
        self.corruption, self.learning_rate = corruption, learning_rate
        self.min_word_count, self.max_vocabulary, self.max_words = min_word_count, max_vocabulary, max_words
        self.keep_empty = keep_empty

    @property
    def vocabulary_words(self) -> int:
        return self.max_words

    def problems(self) -> dict[str, str]:
        found = _at_least_one(embedding_dim=self.embedding_dim, window_size=self.window_size,
                              negative_samples=self.negative_samples,
                              min_word_count=self.min_word_count, max_vocabulary=self.max_vocabulary,
                              max_words=self.max_words)
        if not 0.0 <= self.corruption < 1.0:
            found["corruption"] = f"must be in [0, 1), got {self.corruption}"
        if self.learning_rate <= 0:
            found["learning_rate"] = f"must be > 0, got {self.learning_rate}"
        return found


class Doc2VecCAdamBackbone(Doc2VecCBackbone):
    """Doc2VecC trained as DECA's Algorithm 1 and Appendix A.3.2 write it: one loss (eq. 6), one optimizer (Adam;
    A.3.2's lr 1e-3, the configs' 3e-3) for ``U`` and ``V`` and the contrastive term together, batches of 4,096. The
    configs' reading: the closest to the paper's Table 3 of the two measured (docs/reproduce.md#deca).

    The reading (issue 37; docs/reproduce.md#deca): the 4,096 are word-level training examples as in Doc2VecC, a
    target word with its CBOW window and its document, the document represented by Table 2's "#Sample" words drawn
    from it (``sample_words``), their mean with the context's dropped out at the appendix's rate 0.3; each step
    minimises the examples' l_d and lambda times l_c over the documents the examples come from (a document and its
    augmentation by eq. 1), so an epoch is hundreds of optimizer steps and the contrastive term is trained at each.
    The DataModule's ``global_batch_size`` is then the documents (and augmentations) drawn at once, whose word
    positions are shuffled and cut into steps of ``examples_per_step``.

    Args:
        embedding_dim, window_size, negative_samples, min_word_count, max_vocabulary, max_words, keep_empty: as
            :class:`Doc2VecCBackbone`.
        sample_words: Words drawn from a document to represent it in an example (Table 2 "#Sample").
        dropout: Dropout rate of an example's hidden vector (Appendix A.3.2: 0.3).
        examples_per_step: Word-level examples per optimizer step (Appendix A.3.2's batch size, 4,096).
    """

    def __init__(self, embedding_dim: int = 100, window_size: int = 10, negative_samples: int = 5,
                 sample_words: int = 5, dropout: float = 0.3, examples_per_step: int = 4096,
                 min_word_count: int = 10, max_vocabulary: int = 100_000, max_words: int = 10_000,
                 keep_empty: bool = False) -> None:
        super().__init__(embedding_dim, window_size, negative_samples, min_word_count=min_word_count,
                         max_vocabulary=max_vocabulary, max_words=max_words, keep_empty=keep_empty)
        self.sample_words, self.dropout, self.examples_per_step = sample_words, dropout, examples_per_step

    def problems(self) -> dict[str, str]:
        found = super().problems() | _at_least_one(sample_words=self.sample_words,
                                                   examples_per_step=self.examples_per_step)
        if not 0.0 <= self.dropout < 1.0:
            found["dropout"] = f"must be in [0, 1), got {self.dropout}"
        return found


class EncoderBackbone:
    """A Hugging Face encoder's [CLS] vector, trained on the contrastive loss alone (Appendix A.3.2: BERT-base,
    512 tokens).

    Args:
        encoder: The encoder (:class:`~lit_docemb.models.EncoderSpec`): ``name`` (folder, hub name or
            ``package:<module>``), ``pretrained`` (start from its weights) and ``max_length`` (tokens per document);
            DECA reads the [CLS] vector and no other option of the block.
    """

    vocabulary_words = ENCODER_VOCABULARY_WORDS
    #: The block's options DECA does not read: each must stay at its default.
    UNUSED = ("pooling", "compile", "packed", "first_token_global_attention", "instruction", "instruction_in_pooling",
              "sentence_transformers_head")

    def __init__(self, encoder: EncoderSpec) -> None:
        self.encoder = EncoderSpec.of(encoder)

    @property
    def max_length(self) -> int:
        """Tokens per document."""
        return self.encoder.max_length

    def problems(self) -> dict[str, str]:
        found = {f"encoder.{k}": v for k, v in _at_least_one(max_length=self.encoder.max_length).items()}
        defaults = inspect.signature(EncoderSpec).parameters
        for name in self.UNUSED:
            if getattr(self.encoder, name) != defaults[name].default:
                found[f"encoder.{name}"] = (f"DECA's encoder backbone does not use it, got "
                                            f"{getattr(self.encoder, name)!r}: leave it at {defaults[name].default!r}")
        return found


class SimCLR:
    """SimCLR's NT-Xent (eq. 4) between a document and its augmentation.

    Args:
        temperature: tau (paper 1.0).
        denominator: NT-Xent's ``paper`` (eq. 4) or ``simclr`` form, see :class:`~lit_docemb.losses.NTXentLoss`.
        gather_across_devices: Negatives from all devices.
        weight: lambda of eq. 6, the weight of the contrastive loss against Doc2VecC's (Doc2VecC backbone; an
            encoder trains on the contrastive loss alone, so it must stay 1.0 there).
    """

    loss_name = "ntxent_loss"
    draws_augmentation = True

    def __init__(self, temperature: float = 1.0, denominator: Literal["paper", "simclr"] = "paper",
                 gather_across_devices: bool = True, weight: float = 1.0) -> None:
        self.temperature, self.denominator = temperature, denominator
        self.gather_across_devices, self.weight = gather_across_devices, weight

    def problems(self) -> dict[str, str]:
        found = {}
        if self.temperature <= 0:
            found["temperature"] = f"must be > 0, got {self.temperature}"
        if self.weight < 0:
            found["weight"] = f"must be >= 0, got {self.weight}"
        return found


class SimSiam:
    """SimSiam's loss (eq. 5) with its predictor MLP (2 layers, BatchNorm).

    Args:
        predictor_hidden: Hidden units of the predictor (paper 64).
        weight: lambda of eq. 6 (Doc2VecC backbone; must stay 1.0 with an encoder).
    """

    loss_name = "simsiam_loss"
    draws_augmentation = True

    def __init__(self, predictor_hidden: int = 64, weight: float = 1.0) -> None:
        self.predictor_hidden, self.weight = predictor_hidden, weight

    def problems(self) -> dict[str, str]:
        found = _at_least_one(predictor_hidden=self.predictor_hidden)
        if self.weight < 0:
            found["weight"] = f"must be >= 0, got {self.weight}"
        return found


class Append:
    """Table 5's "-Contrastive": no contrastive loss; each document is followed by one augmentation and Doc2VecC
    trains on the merged document with l_d alone (Doc2VecC backbone only)."""

    loss_name = None
    draws_augmentation = True

    def problems(self) -> dict[str, str]:
        return {}


class Doc2VecCAlone:
    """No contrastive loss and no augmentation: Doc2VecC's own loss l_d on the documents themselves (eq. 2-3), the
    Doc2VecC rows of DECA Tables 3-4 and CTPE Tables 2-3 (Doc2VecC backbone only). Plain Doc2VecC, not DECA at
    lambda = 0: no augmentation is drawn, so no document is dropped for an empty one and no thesaurus is read."""

    loss_name = None
    draws_augmentation = False

    def problems(self) -> dict[str, str]:
        return {}
