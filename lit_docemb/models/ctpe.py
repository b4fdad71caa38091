"""CTPE's encoders (seed paper 004, §3.2): token vectors → four parallel 1-D convolutions → a text vector,
one CNN for former parts and one for latter parts, and the coupled-pair similarity of eq. 2; and the input models
that make the token vectors (CTPE's ``embeddings`` argument: :class:`WordEmbeddings`, :class:`TransformerTokens`,
:class:`ElmoTokens`, :class:`SkipThoughtSentences`), each building a tokenizer of
:mod:`lit_docemb.models.ctpe_tokenizers` together with the module its ids feed.

Plain ``nn.Module``s and their builders: no Lightning, no ``torch.distributed``, no corpus names.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AutoModel

from lit_docemb.errors import BadArgument
from lit_docemb.models.ctpe_tokenizers import CharacterIds, HFTokenIds, SentenceWordIds, WordTokenizer, preprocess_words
from lit_docemb.models.elmo import ElmoBiLM, FrozenElmoStates, LayerMix
from lit_docemb.models.encoder import resolve_model_path
from lit_docemb.models.skip_thoughts import FrozenSkipThoughtStates, SkipThoughtsEncoder
from lit_docemb.models.word_vectors import VectorsFormat, lowered_keys, read_word_vectors, stable_hash


class ConvTextEncoder(nn.Module):
    """The CNN model of CTPE's Figure 1: parallel convolutions (stride 1, ReLU), max-pool over time, concatenation.

    A text of ``l`` tokens gives, for a kernel of width ``w``, ``n_filters`` feature maps of ``l - w + 1``
    positions, each max-pooled to one value; the widths' vectors are concatenated into ``len(widths) *
    n_filters`` values (4 x 1,024 in the paper). Padding never enters the pool: padded token vectors are zeroed
    and only windows lying inside the text are pooled; a text shorter than a kernel is zero-padded to one window.

    Args:
        input_dim: Dimension of the token vectors (100 for the paper's word2vec).
        n_filters: Filters per kernel width, ``n_f`` (paper: 1,024).
        widths: Kernel widths ``n_s`` (paper: 1, 2, 3, 5).
    """

    def __init__(self, input_dim: int, n_filters: int = 1024, widths: Sequence[int] = (1, 2, 3, 5)) -> None:
        super().__init__()
        if not widths or min(widths) < 1 or n_filters < 1:
            raise ValueError(f"need positive kernel widths and n_filters, got widths={list(widths)}, "
                             f"n_filters={n_filters}")
        self.widths = list(widths)
        self.convs = nn.ModuleList(nn.Conv1d(input_dim, n_filters, w) for w in self.widths)
        self.output_dim = len(self.widths) * n_filters

    def forward(self, vectors: Tensor, mask: Tensor) -> Tensor:
        """Token vectors (B, T, E) and mask (B, T) (1 = token) → text vectors (B, len(widths) * n_filters)."""
        lengths = mask.sum(1)  # (B,)
        x = (vectors * mask.unsqueeze(-1).to(vectors.dtype)).transpose(1, 2)  # (B, E, T), padding zeroed
        if x.shape[-1] < max(self.widths):
            x = F.pad(x, (0, max(self.widths) - x.shape[-1]))
        pooled = []
        for width, conv in zip(self.widths, self.convs, strict=True):
            maps = F.relu(conv(x))  # (B, n_f, T - w + 1)
            positions = torch.arange(maps.shape[-1], device=maps.device)
            inside = positions < (lengths - width + 1).clamp(min=1).unsqueeze(1)  # (B, T - w + 1)
            # maps are >= 0 after ReLU, so zeroing the windows outside the text never changes the maximum
            pooled.append((maps * inside.unsqueeze(1).to(maps.dtype)).amax(-1))  # (B, n_f)
        return torch.cat(pooled, dim=-1)  # (B, len(widths) * n_f)


class WordVectors(nn.Module):
    """Word embeddings (index 0 is padding), optionally initialised from given vectors (word2vec), fixed or trained.

    Fixed vectors stay a parameter (saved in the checkpoint, restored with it) that never gets a gradient.

    Args:
        vocabulary_size: Number of rows, padding and unknown-word rows included.
        dim: Vector dimension (paper: 100).
        initial: Optional (vocabulary_size, dim) starting weights.
        trainable: Whether the loss updates the vectors (``False``: they stay as initialised).
    """

    def __init__(self, vocabulary_size: int, dim: int = 100, initial: Tensor | None = None,
                 trainable: bool = True) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocabulary_size, dim, padding_idx=0)
        if initial is not None:
            if tuple(initial.shape) != (vocabulary_size, dim):
                raise ValueError(f"initial vectors {tuple(initial.shape)} != ({vocabulary_size}, {dim})")
            with torch.no_grad():
                self.embedding.weight.copy_(initial)
        self.embedding.weight.requires_grad_(trainable)
        self.dim = dim

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        return self.embedding(input_ids)  # (B, T, E)


PairStrategy = Literal["separately", "together"]


class FrozenTransformerStates(nn.Module):
    """Contextual token states of a pretrained Hugging Face encoder, frozen (CTPE §4.2/§4.5 use the deep
    language models "without fine-tuning"; only the CNNs train). It stays in eval mode even when its parent is
    put in training mode, so dropout never touches the states.

    Args:
        name_or_path: Local folder, hub name or ``package:<module>`` of the encoder.
        pair_strategy: How a text pair's two parts go through the encoder (:class:`TransformerTokens`):
            ``"separately"`` (each part its own sequence) or ``"together"`` (:meth:`pair_states`).

    A model whose forward takes no attention mask (Transformer-XL, in transformers 4.x) is run without one: the
    batches are right-padded, so a left-to-right model never lets a real token see the padding after it (a
    bidirectional model without a mask would: there is none among Hugging Face's encoders).
    """

    def __init__(self, name_or_path: str, pair_strategy: PairStrategy = "separately") -> None:
        super().__init__()
        self.model = AutoModel.from_pretrained(resolve_model_path(name_or_path))
        self.model.requires_grad_(False)
        self.model.eval()
        self.pair_strategy = pair_strategy
        self.takes_attention_mask = "attention_mask" in inspect.signature(self.model.forward).parameters
        self.dim: int = self.model.config.hidden_size
        self.max_positions: int | None = getattr(self.model.config, "max_position_embeddings", None)

    def train(self, mode: bool = True) -> FrozenTransformerStates:
        super().train(mode)
        self.model.eval()
        return self

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        if input_ids.shape[0] == 0:
            return input_ids.new_zeros((*input_ids.shape, self.dim), dtype=torch.float)
        mask = {"attention_mask": attention_mask} if self.takes_attention_mask else {}
        with torch.no_grad():
            return self.model(input_ids=input_ids, **mask).last_hidden_state  # (B, T, E)

    def pair_states(self, former_ids: Tensor, former_mask: Tensor, latter_ids: Tensor,
                    latter_mask: Tensor) -> tuple[Tensor, Tensor]:
        """``pair_strategy: together``: each row's former tokens followed at once by its latter tokens as one
        sequence (no token between them, right-padded), encoded in one pass; the states are then cut back into the
        former part's (B, Tf, E) and the latter part's (B, Tl, E), aligned with the given ids and masks."""
        if former_ids.shape[0] == 0:  # an empty batch (a device's share of the last step)
            return self(former_ids, former_mask), self(latter_ids, latter_mask)
        former_len, latter_len = former_mask.sum(1, keepdim=True), latter_mask.sum(1, keepdim=True)  # (B, 1)
        t_f, t_l = former_ids.shape[1], latter_ids.shape[1]
        position = torch.arange(t_f + t_l, device=former_ids.device).unsqueeze(0)  # (1, Tf + Tl)
        in_former = position < former_len  # (B, Tf + Tl)
        from_latter = (position - former_len).clamp(0, max(t_l - 1, 0))
        ids = torch.where(in_former, former_ids.gather(1, position.clamp(max=max(t_f - 1, 0)).expand_as(in_former)),
                          latter_ids.gather(1, from_latter))  # (B, Tf + Tl)
        mask = (position < former_len + latter_len).to(former_mask.dtype)
        ids = ids * mask  # padding positions hold id 0, masked out
        states = self(ids, mask)  # (B, Tf + Tl, E)
        latter_positions = (former_len + torch.arange(t_l, device=ids.device)).clamp(max=t_f + t_l - 1)  # (B, Tl)
        latter = states.gather(1, latter_positions.unsqueeze(-1).expand(-1, -1, states.shape[-1]))
        return states[:, :t_f], latter


class CoupledPairEncoder(nn.Module):
    """Token vectors shared by both parts, then a former-part CNN and a latter-part CNN.

    §3.2 / Figure 1: the four texts of a training example (f_i, b_i, f_x, b_y) go through "four CNN models
    (former part, latter part, former part and latter part)", and "positive and negative samples usually
    share the same model parameters": so one CNN encodes every former part and another every latter part,
    positive or negative. ``share_part_encoders=True`` uses one CNN for both parts: not the paper's layout, but the
    default of the authors' released code (``_av_CTE.py`` of ``aitsc/text-representation``: ``共享参数``, "share
    parameters", is ``True``, one CNN under one variable scope for title and abstract).
    The embedding model E is one for the whole text, so the token vectors are shared by both parts.

    Args:
        token_vectors: Module (input_ids (B, T), attention_mask (B, T)) → (B, T, E) with an attribute ``dim``, or
            with a ``units`` method → ((B, U, E), mask (B, U)) (sentence vectors: :meth:`part_vectors`).
        n_filters: Filters per kernel width (paper: 1,024).
        widths: Kernel widths (paper: 1, 2, 3, 5).
        share_part_encoders: One CNN for former and latter parts instead of one each.
    """

    def __init__(self, token_vectors: nn.Module, n_filters: int = 1024, widths: Sequence[int] = (1, 2, 3, 5),
                 share_part_encoders: bool = False) -> None:
        super().__init__()
        self.token_vectors = token_vectors
        self.former = ConvTextEncoder(token_vectors.dim, n_filters, widths)
        self.latter = self.former if share_part_encoders else ConvTextEncoder(token_vectors.dim, n_filters, widths)
        self.output_dim = self.former.output_dim

    def part_vectors(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        """The vectors (B, U, E) of a part's units and their mask (B, U): its tokens', or, for a source with a
        ``units`` method (sentence vectors), the units it groups the ids into."""
        units = getattr(self.token_vectors, "units", None)
        if units is not None:
            return units(input_ids, attention_mask)
        return self.token_vectors(input_ids, attention_mask), attention_mask

    def pair_vectors(self, former_ids: Tensor, former_mask: Tensor, latter_ids: Tensor,
                     latter_mask: Tensor) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
        """The unit vectors and masks of row-aligned former and latter parts (a pair per row): each part on its own
        (:meth:`part_vectors`), or, when the token vectors encode pairs together (``pair_strategy: together``), the
        two parts of a row in one sequence."""
        if getattr(self.token_vectors, "pair_strategy", "separately") == "together":
            former, latter = self.token_vectors.pair_states(former_ids, former_mask, latter_ids, latter_mask)
            return (former, former_mask), (latter, latter_mask)
        return self.part_vectors(former_ids, former_mask), self.part_vectors(latter_ids, latter_mask)

    def encode(self, input_ids: Tensor, attention_mask: Tensor, part: str) -> Tensor:
        """Token ids (B, T) of former (``part="former"``) or latter parts, each part on its own → (B, D)."""
        cnn = {"former": self.former, "latter": self.latter}[part]
        return cnn(*self.part_vectors(input_ids, attention_mask))

    def forward(self, former_ids: Tensor, former_mask: Tensor, latter_ids: Tensor,
                latter_mask: Tensor) -> tuple[Tensor, Tensor]:
        """The pair (v_f, v_b), each (B, D), of row-aligned former and latter parts (:meth:`pair_vectors`)."""
        former, latter = self.pair_vectors(former_ids, former_mask, latter_ids, latter_mask)
        return self.former(*former), self.latter(*latter)


def coupled_pair_similarity(former_a: Tensor, latter_a: Tensor, former_b: Tensor, latter_b: Tensor) -> Tensor:
    """CTPE eq. 2 between every document of set a (Q) and every document of set b (N):
    ``sim(a_q, b_n) = cos(v_f(a_q), v_b(b_n)) + cos(v_f(b_n), v_b(a_q))`` as a (Q, N) matrix in fp32.

    It is symmetric in its two documents but not a self-similarity: sim(d, d) is not 2 in general (§3.3).
    """
    fa, la, fb, lb = (F.normalize(x.float(), dim=-1) for x in (former_a, latter_a, former_b, latter_b))
    return fa @ lb.T + la @ fb.T  # (Q, N)


# --- the input models (CTPE's ``embeddings`` argument): ``build(texts)`` gives a tokenizer and the token vectors its
# ids feed; ``restore(words)`` (WordEmbeddings) rebuilds them from a checkpoint's vocabulary


def train_word2vec(texts: Iterable[str], tokenizer: WordTokenizer, dim: int, window: int, epochs: int,
                   workers: int, seed: int) -> torch.Tensor:
    """Skip-gram word2vec (gensim) on the preprocessed ``texts``; returns (len(tokenizer), dim) vectors in
    the tokenizer's order: the padding row is 0, words word2vec did not keep (and [UNK]) get small random
    vectors as in word2vec's own initialisation."""
    try:
        from gensim.models import Word2Vec
    except ImportError as err:
        raise ImportError("word2vec initialisation needs gensim, a base requirement of lit_docemb: "
                          "pip install -e . (or pip install 'gensim>=4.3')") from err
    sentences = [[w for w in preprocess_words(t) if w in tokenizer.index] for t in texts]
    sentences = [s for s in sentences if s]
    if not sentences:
        raise ValueError("no word of the vocabulary occurs in the training texts: cannot train word2vec")
    model = Word2Vec(sentences=sentences, vector_size=dim, window=window, min_count=1, sg=1, epochs=epochs,
                     workers=workers, seed=seed, hashfxn=stable_hash)
    generator = torch.Generator().manual_seed(seed)
    vectors = (torch.rand(len(tokenizer), dim, generator=generator) - 0.5) / dim
    vectors[0] = 0.0
    for word, row in model.wv.key_to_index.items():
        vectors[tokenizer.index[word]] = torch.from_numpy(model.wv.vectors[row].copy())
    return vectors


def load_pretrained_vectors(path: str, vectors_format: VectorsFormat, tokenizer: WordTokenizer, dim: int,
                            seed: int) -> torch.Tensor:
    """(len(tokenizer), dim) vectors from a pretrained file: word2vec's binary (``GoogleNews-vectors-negative300.bin``
    and what ``gensim``'s ``save_word2vec_format(binary=True)`` writes), word2vec's text format (a ``<count> <dim>``
    header line) or GloVe's text (``glove.6B.100d.txt``: no header). A vocabulary word is looked up as is, then
    lower-cased; the padding row is 0 and the words the file lacks (and [UNK]) get small random vectors, as in
    :func:`train_word2vec`. The file's dimension must be ``dim``."""
    vectors = read_word_vectors(path, vectors_format)
    if vectors.vector_size != dim:
        raise BadArgument("dim", f"must be the {vectors.vector_size} dimensions of {path!r}, got {dim}")
    generator = torch.Generator().manual_seed(seed)
    out = (torch.rand(len(tokenizer), dim, generator=generator) - 0.5) / dim
    out[0] = 0.0
    lowered = lowered_keys(vectors)
    for word, row in tokenizer.index.items():
        key = word if word in vectors.key_to_index else lowered.get(word)
        if row > 1 and key is not None:
            out[row] = torch.from_numpy(vectors[key].copy())
    return out


class WordEmbeddings:
    """Word vectors over the training corpus's vocabulary (paper: word2vec, 100 dimensions), fixed by default.

    Whether CTPE's loss updates the word vectors the paper does not say (§3.2 has the embedding model turn a text
    into vectors for the CNN, nothing more); the authors' released code (``aitsc/text-representation``,
    ``_av_CTE.py``) fixes them by default (its parameter ``固定词向量``, "fixed word vectors", is ``True``: the
    table is a constant of the graph). ``trainable: false``, the default, follows that code; ``true`` trains them
    with the CNNs.

    Args:
        init: ``"word2vec"``: skip-gram word2vec trained on the training documents with gensim (window 10,
            §4.2's word2vec settings); ``"random"``: random vectors; ``"pretrained"``: the vectors of a file
            (``vectors``): the paper's word2vec(full) and GloVe(full), trained on the whole arXiv / DBLP / USPTO
            corpus, or GloVe on the task's documents, all made by the ``word-vectors`` command
            (:func:`lit_docemb.models.word_vectors.train_word_vectors`).
        dim: Vector dimension (paper: 100).
        min_count: Words seen fewer times are [UNK] (gensim's default, 5).
        max_vocabulary: Keep at most this many words, the most frequent (``None``: all).
        window: word2vec window.
        epochs: word2vec epochs (§4.2: 100 iterations).
        workers: word2vec threads; 1 makes the vectors repeatable.
        seed: word2vec seed (and that of the random rows).
        vectors: ``init: pretrained``: the vectors file.
        vectors_format: ``"word2vec_binary"`` (word2vec's ``.bin``), ``"word2vec_text"`` (with a ``<count> <dim>``
            header) or ``"glove_text"`` (GloVe's ``.txt``, no header).
        trainable: Whether the margin loss updates the word vectors (default ``False``: fixed, as the authors'
            code; the paper is silent).
    """

    def __init__(self, init: Literal["word2vec", "random", "pretrained"] = "word2vec", dim: int = 100,
                 min_count: int = 5, max_vocabulary: int | None = None, window: int = 10, epochs: int = 100,
                 workers: int = 1, seed: int = 1, vectors: str | None = None,
                 vectors_format: VectorsFormat = "word2vec_binary", trainable: bool = False) -> None:
        if init not in ("word2vec", "random", "pretrained"):
            raise BadArgument("init", f"must be 'word2vec', 'random' or 'pretrained', got {init!r}")
        if (init == "pretrained") != (vectors is not None):
            raise BadArgument("vectors", "is the file of init: pretrained, and only of it: set both or neither")
        if vectors_format not in ("word2vec_binary", "word2vec_text", "glove_text"):
            raise BadArgument("vectors_format", f"must be 'word2vec_binary', 'word2vec_text' or 'glove_text', got "
                              f"{vectors_format!r}")
        self.vectors, self.vectors_format = vectors, vectors_format
        self.init, self.dim, self.min_count, self.max_vocabulary = init, dim, min_count, max_vocabulary
        self.window, self.epochs, self.workers, self.seed = window, epochs, workers, seed
        self.trainable = trainable

    def build(self, texts: Sequence[str]) -> tuple[WordTokenizer, WordVectors]:
        tokenizer = WordTokenizer.from_texts(texts, self.min_count, self.max_vocabulary)
        initial = None
        if self.init == "word2vec":
            initial = train_word2vec(texts, tokenizer, self.dim, self.window, self.epochs, self.workers, self.seed)
        elif self.init == "pretrained":
            initial = load_pretrained_vectors(self.vectors, self.vectors_format, tokenizer, self.dim, self.seed)
        return tokenizer, WordVectors(len(tokenizer), self.dim, initial, self.trainable)

    def restore(self, words: Sequence[str]) -> tuple[WordTokenizer, WordVectors]:
        """The tokenizer and (untrained) vectors of a saved vocabulary; the weights come from the checkpoint."""
        tokenizer = WordTokenizer(words)
        return tokenizer, WordVectors(len(tokenizer), self.dim, trainable=self.trainable)


class TransformerTokens:
    """A pretrained Hugging Face encoder's contextual token states, frozen (§4.5's deep language models: Table 4's
    BERT, GPT, GPT-2, Transformer-XL, XLM, XLNet and RoBERTa rows).

    §4.3: "Because these deep language models are context-dependent token embedding, there are two strategies for
    training text pairs: the former part text and the latter part text are trained separately or together. We take
    the maximum of the performance of these two strategies." Our reading, for every text pair CTPE encodes (the
    coupled pair (f_i, b_i), the uncoupled (f_i, b_j) or (f_j, b_i), a document's own pair when it is embedded):

    * ``separately``: the former part is one sequence and the latter part another; a token's state sees only its
      own part.
    * ``together``: the pair is one sequence, the former part's tokens then the latter part's (each cut at
      ``max_length`` first, nothing between them: the paper's BERT rows drop [CLS] and [SEP]), encoded in one pass;
      the states are cut back into the two parts, which then go through their own CNNs as before. A token's state
      then sees the other part: the latter part's in a left-to-right model (GPT, GPT-2, Transformer-XL: the former
      part's states are those of ``separately``), both parts' in a bidirectional one (BERT, RoBERTa, XLM). The
      pair must fit the encoder: 2 x ``max_length`` <= its positions.

    The encoder stays frozen in both. A Table 4 cell is the better of the two runs.

    Args:
        encoder: Local folder, hub name or ``package:<module>`` of the encoder.
        pair_strategy: ``"separately"`` or ``"together"``, as above.
    """

    def __init__(self, encoder: str, pair_strategy: PairStrategy = "separately") -> None:
        if pair_strategy not in ("separately", "together"):
            raise BadArgument("embeddings.init_args.pair_strategy",
                              f"must be 'separately' or 'together', got {pair_strategy!r}")
        self.encoder, self.pair_strategy = encoder, pair_strategy

    def build(self, texts: Sequence[str] = ()) -> tuple[HFTokenIds, FrozenTransformerStates]:
        return HFTokenIds(self.encoder), FrozenTransformerStates(self.encoder, self.pair_strategy)


class ElmoTokens:
    """ELMo's contextual word vectors, frozen (Table 4's ELMo row: "Original (5.5B)" from allennlp.org/elmo, read by
    :mod:`lit_docemb.models.elmo`). The words are those of :func:`preprocess_words` (the paper preprocesses every
    model's input the same way), given to ELMo as characters (:class:`CharacterIds`); each former and latter part is
    one ELMo sentence of at most ``max_length`` words.

    Args:
        options_file: ``elmo_2x4096_512_2048cnn_2xhighway_5.5B_options.json``.
        weights_file: ``elmo_2x4096_512_2048cnn_2xhighway_5.5B_weights.hdf5``.
        layer_mix: The token vector: ``"mean"``, the mean of ELMo's three layers (the paper does not say which
            layers; a scalar mix at its start, the release having no task weights) or ``"top"``, the top biLSTM layer.
    """

    def __init__(self, options_file: str, weights_file: str, layer_mix: LayerMix = "mean") -> None:
        if layer_mix not in ("mean", "top"):
            raise BadArgument("embeddings.init_args.layer_mix", f"must be 'mean' or 'top', got {layer_mix!r}")
        self.options_file, self.weights_file, self.layer_mix = options_file, weights_file, layer_mix

    def build(self, texts: Sequence[str] = ()) -> tuple[CharacterIds, FrozenElmoStates]:
        """Reads the files (when CTPE is built: a missing or mismatched file stops there in one line)."""
        try:
            bilm = ElmoBiLM.from_files(self.options_file, self.weights_file)
        except BadArgument as err:
            raise BadArgument(f"embeddings.init_args.{err.argument}", err.problem) from err
        tokenizer = CharacterIds()
        return tokenizer, FrozenElmoStates(bilm, self.layer_mix, tokenizer.unit_end_id, tokenizer.first_byte_id)


class SkipThoughtSentences:
    """Skip-thoughts' sentence vectors, frozen (Table 4's Skip-thoughts row: the generic combine-skip model, 4,800
    dimensions, uni-skip then bi-skip, with the EOS token; read by :mod:`lit_docemb.models.skip_thoughts`). CTPE's
    parts are then sequences of sentence vectors (:class:`SentenceWordIds`; the paper's l = 20 sentences per part is
    ``max_length: 20``); the avg column (``document_vector: average``) is the mean of the document's sentence
    vectors, the paper's avg-Skip-thoughts.

    Args:
        folder: The folder holding ``uni_skip.npz``, ``uni_skip.npz.pkl``, ``bi_skip.npz``, ``bi_skip.npz.pkl``,
            ``utable.npy``, ``btable.npy`` and ``dictionary.txt`` as released.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def build(self, texts: Sequence[str] = ()) -> tuple[SentenceWordIds, FrozenSkipThoughtStates]:
        """Reads the files (when CTPE is built: a missing or mismatched file stops there in one line)."""
        try:
            encoder, dictionary = SkipThoughtsEncoder.from_folder(self.folder)
        except BadArgument as err:
            raise BadArgument(f"embeddings.init_args.{err.argument}", err.problem) from err
        tokenizer = SentenceWordIds(dictionary)
        return tokenizer, FrozenSkipThoughtStates(encoder, tokenizer.unit_end_id, tokenizer.first_word_id)
