"""CTPE's batches and collators (seed 004): documents split at ``pos`` into (former, latter) token ids, with a
freshly drawn uncoupled pair per document in training. See :mod:`lit_docemb.methods.ctpe`.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections import Counter
from pathlib import Path
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
import torch

from lit_docemb.data.core.batches import CoupledDocumentBatch, CoupledPairBatch
from lit_docemb.data.core.document import Document, doc_index
from lit_docemb.data.caches.field_cache import FieldRows
from lit_docemb.data.caches.passage_cache import tokenizer_fingerprint
from lit_docemb.errors import BadArgument
from lit_docemb.data.core.tokens import pad_ids
from lit_docemb.models.ctpe import FrozenTransformerStates, WordVectors
from lit_docemb.models.elmo import ElmoBiLM, FrozenElmoStates, LayerMix
from lit_docemb.models.skip_thoughts import FrozenSkipThoughtStates, SkipThoughtsEncoder, dictionary_rows
from lit_docemb.models.encoder import load_tokenizer
from lit_docemb.models.word_vectors import VectorsFormat, lowered_keys, read_word_vectors, stable_hash


class PairSplitter:
    """Document → (former ids, latter ids) at ``pos``, or ``None`` (see :func:`split_ids`): from its fields' ids in
    ``cached`` (:class:`FieldIds` rows of the field cache) when the cache holds it, else from its text; both give the
    same ids.

    Args:
        tokenizer: A :class:`WordTokenizer`, :class:`HFTokenIds`, :class:`CharacterIds` or :class:`SentenceWordIds`.
        pos: The split position (:func:`check_pos`).
        max_length: Ids kept per part.
        cached: The field cache's rows by document id, made with the same tokenizer; ``None``: always the text.
    """

    def __init__(self, tokenizer, pos: float | str, max_length: int, cached: FieldRows | None = None) -> None:
        self.tokenizer, self.pos, self.max_length, self.cached = tokenizer, pos, max_length, cached

    def __call__(self, doc: Document) -> tuple[list[int], list[int]] | None:
        row = None if self.cached is None else self.cached.get(doc.id)
        unit_end_id = getattr(self.tokenizer, "unit_end_id", None)  # parts of words / sentences: max_length counts them
        if row is not None:
            return split_fields(row.fields(), self.pos, self.max_length, unit_end_id)
        return split_ids(doc, self.pos, self.tokenizer.encode, self.max_length, unit_end_id)


class FieldIds:
    """The encoding that CTPE's field cache stores (:class:`~lit_docemb.data.caches.field_cache.FieldTokenCache`): a
    document → (heading, ids) of each of its :func:`document_fields`, encoded by ``tokenizer``.

    Args:
        tokenizer: A :class:`WordTokenizer` or :class:`HFTokenIds`.
    """

    def __init__(self, tokenizer: WordTokenizer | HFTokenIds) -> None:
        self.tokenizer = tokenizer

    def __call__(self, document: Document) -> list[tuple[str, list[int]]]:
        return [(heading, self.tokenizer.encode(text)) for heading, text in document_fields(document)]

    def key(self) -> str:
        """The tokenizer's key and this module's source (the fields and the word rules)."""
        return f"{self.tokenizer.key()}:{hashlib.blake2b(Path(__file__).read_bytes(), digest_size=16).hexdigest()}"


class CoupledPairCollator:
    """Documents → :class:`CoupledPairBatch` (runs in dataloader workers). In training the partners and the
    side of each uncoupled pair come from torch's RNG, which the training loader seeds per batch from (seed, epoch,
    position: new pairs every epoch, the same after a resume, see ``lit_docemb/data/core/sampling.py``); with
    ``deterministic`` they are a function of the document id."""

    max_partner_draws = 10

    def __init__(self, splitter: PairSplitter, sampler: PartnerSampler, pad_id: int, deterministic: bool) -> None:
        self.splitter, self.sampler, self.pad_id, self.deterministic = splitter, sampler, pad_id, deterministic

    def _partner(self, doc: Document, generator: torch.Generator) -> tuple[list[int], list[int]] | None:
        for _ in range(self.max_partner_draws):
            partner = self.sampler.partner(doc.id, generator)
            pair = None if partner is None else self.splitter(partner)
            if pair is not None:
                return pair
        return None

    def __call__(self, documents: list[Document]) -> CoupledPairBatch:
        batch_generator = None
        if not self.deterministic:  # one draw from torch's RNG per batch, then a private generator
            batch_generator = torch.Generator().manual_seed(int(torch.randint(2**62, (1,))))
        rows = []
        for doc in documents:
            generator = batch_generator if batch_generator is not None else \
                torch.Generator().manual_seed(doc_index(doc.id))
            pair = self.splitter(doc)
            partner = None if pair is None else self._partner(doc, generator)
            if partner is None:
                continue
            swap_latter = bool(torch.randint(2, (), generator=generator))  # (f_i, b_j) else (f_j, b_i)
            negative = (pair[0], partner[1]) if swap_latter else (partner[0], pair[1])
            rows.append((*pair, *negative))
        columns = [pad_ids([row[c] for row in rows], self.pad_id) for c in range(4)]
        return CoupledPairBatch(*columns, skipped=len(documents) - len(rows))


class CoupledDocumentCollator:
    """Documents → :class:`CoupledDocumentBatch` for representation; unsplittable ones are dropped and counted."""

    def __init__(self, splitter: PairSplitter, pad_id: int) -> None:
        self.splitter, self.pad_id = splitter, pad_id

    def __call__(self, documents: list[Document]) -> CoupledDocumentBatch:
        pairs = [(doc.id, self.splitter(doc)) for doc in documents]
        kept = [(doc_id, pair) for doc_id, pair in pairs if pair is not None]
        former = pad_ids([pair[0] for _, pair in kept], self.pad_id)
        latter = pad_ids([pair[1] for _, pair in kept], self.pad_id)
        return CoupledDocumentBatch(former, latter, [doc_id for doc_id, _ in kept], len(documents) - len(kept))


def tfidf_neighbours(texts: Sequence[str], k: int = 100, chunk_size: int = 1024) -> np.ndarray:
    """(N, min(k, N - 1)) int64: row i holds the indices of the k texts most similar to text i by the cosine
    of their TF-IDF vectors (scikit-learn's defaults), best first, never i itself."""
    if len(texts) < 2:
        raise ValueError(f"TF-IDF neighbours need at least 2 documents, got {len(texts)}")
    from sklearn.feature_extraction.text import TfidfVectorizer  # here: the package imports without scikit-learn

    k = min(k, len(texts) - 1)
    matrix = TfidfVectorizer().fit_transform(texts)  # (N, V), rows L2-normalised
    rows = []
    for start in range(0, len(texts), chunk_size):
        scores = (matrix[start:start + chunk_size] @ matrix.T).toarray()  # (C, N)
        scores[np.arange(len(scores)), np.arange(start, start + len(scores))] = -np.inf  # never itself
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # (C, k), unordered
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        rows.append(np.take_along_axis(top, order, axis=1))
    return np.concatenate(rows).astype(np.int64)


class PartnerSampler:
    """Draws, for a document of ``corpus``, another document of ``corpus`` as its negative partner.

    Picklable (it runs in dataloader workers); the draws come from the generator passed in.

    Args:
        corpus: The documents partners come from (indexable).
        ids: ``ids[i]`` is the id of ``corpus[i]``.
        neighbours: Optional (N, k) TF-IDF neighbour indices (:func:`tfidf_neighbours`).
        neighbour_probability: With ``neighbours``, the chance that a partner comes from the document's neighbour
            list rather than uniformly from the corpus (§4.7's random(random(T100), random(D)): 0.5).
    """

    def __init__(self, corpus: Sequence[Document], ids: Sequence[str], neighbours: np.ndarray | None = None,
                 neighbour_probability: float = 0.5) -> None:
        if not 0.0 <= neighbour_probability <= 1.0:
            raise ValueError(f"neighbour_probability must be in [0, 1], got {neighbour_probability}")
        if len(ids) != len(corpus):
            raise ValueError(f"{len(ids)} ids for {len(corpus)} documents")
        if neighbours is not None and len(neighbours) != len(corpus):
            raise ValueError(f"{len(neighbours)} neighbour rows for {len(corpus)} documents")
        self.corpus = corpus
        self.row_of = {doc_id: row for row, doc_id in enumerate(ids)}
        self.neighbours = neighbours
        self.neighbour_probability = neighbour_probability

    def __len__(self) -> int:
        return len(self.corpus)

    def partner_row(self, doc_id: str, generator: torch.Generator) -> int | None:
        """The corpus row of a partner for ``doc_id`` (never its own row); ``None`` when the corpus holds no
        other document."""
        row = self.row_of.get(doc_id)
        n = len(self.corpus)
        if n - (row is not None) < 1:
            return None
        from_neighbours = self.neighbours is not None and row is not None
        if from_neighbours and float(torch.rand((), generator=generator)) < self.neighbour_probability:
            choices = self.neighbours[row]
            return int(choices[int(torch.randint(len(choices), (), generator=generator))])
        if row is None:
            return int(torch.randint(n, (), generator=generator))
        other = int(torch.randint(n - 1, (), generator=generator))
        return other + (other >= row)  # uniform over the rows other than ``row``

    def partner(self, doc_id: str, generator: torch.Generator) -> Document | None:
        row = self.partner_row(doc_id, generator)
        return None if row is None else self.corpus[row]


_TAG = re.compile(r"<[^>]+>")


_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


PAD, UNK = "[PAD]", "[UNK]"


def preprocess_words(text: str) -> list[str]:
    """§4.1's five steps: lowercase, remove HTML tags, restore HTML escapes, split at punctuation and
    whitespace, drop tokens without a letter."""
    text = html.unescape(_TAG.sub(" ", text.lower()))
    return [w for w in _WORD.findall(text) if any(c.isalpha() for c in w)]


class WordTokenizer:
    """Words (after :func:`preprocess_words`) → ids of a fixed vocabulary; id 0 pads, id 1 is any unknown word.

    Args:
        words: The vocabulary without the two special entries, most frequent first.
    """

    def __init__(self, words: Sequence[str]) -> None:
        self.words = [PAD, UNK, *words]
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ValueError("the vocabulary repeats a word")
        self.pad_id = 0

    @classmethod
    def from_texts(cls, texts: Iterable[str], min_count: int = 1, max_size: int | None = None) -> WordTokenizer:
        """The words seen at least ``min_count`` times, by count then alphabetically (the same on every rank)."""
        counts = Counter(w for text in texts for w in preprocess_words(text))
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls(kept[:max_size])

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, text: str) -> list[int]:
        return [self.index.get(w, 1) for w in preprocess_words(text)]

    def key(self) -> str:
        """A hash of the vocabulary (what decides the ids besides :func:`preprocess_words`)."""
        return "words:" + hashlib.blake2b("\n".join(self.words).encode(), digest_size=16).hexdigest()


class HFTokenIds:
    """A Hugging Face tokenizer's ids without special tokens (the paper's BERT rows drop [CLS] and [SEP]).

    Args:
        name_or_path: Folder, hub name or ``package:<module>`` of the encoder whose tokenizer this is.
    """

    def __init__(self, name_or_path: str) -> None:
        self.tokenizer = load_tokenizer(name_or_path)
        self.pad_id = self.tokenizer.pad_token_id or 0

    def __len__(self) -> int:
        return len(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    def key(self) -> str:
        """The tokenizer's fingerprint (its serialised state)."""
        return "hf:" + tokenizer_fingerprint(self.tokenizer)


def check_pos(pos: float | str) -> float | str:
    """Validates ``pos`` (see the module docstring) and returns it."""
    if isinstance(pos, int | float) and not isinstance(pos, bool):
        if not 0.0 < float(pos) < 1.0:
            raise BadArgument("pos", f"a token ratio must lie strictly between 0 and 1, got {pos}")
        return float(pos)
    if pos == "title" or (isinstance(pos, str) and pos.startswith("before:") and pos[len("before:"):].strip()):
        return pos
    raise BadArgument("pos", f"must be 'title', 'before:<section heading>' or a ratio in (0, 1), got {pos!r}")


def document_fields(doc: Document) -> list[tuple[str, str]]:
    """(heading, text) of the title (heading "title") and of every section, in order."""
    fields = [(s.heading.strip().lower(), s.text) for s in doc.sections]
    if doc.title and not any(heading == "title" for heading, _ in fields):
        fields.insert(0, ("title", doc.title))
    return fields


def split_ids(doc: Document, pos: float | str, encode, max_length: int,
              unit_end_id: int | None = None) -> tuple[list[int], list[int]] | None:
    """(former ids, latter ids) of ``doc`` split at ``pos``, each cut to ``max_length`` (:func:`split_fields`);
    ``None`` when it cannot be split (``encode``: text → ids)."""
    return split_fields([(heading, encode(text)) for heading, text in document_fields(doc)], pos, max_length,
                        unit_end_id)


def split_fields(fields: Sequence[tuple[str, Sequence[int]]], pos: float | str, max_length: int,
                 unit_end_id: int | None = None) -> tuple[list[int], list[int]] | None:
    """(former ids, latter ids) of a document's encoded :func:`document_fields` split at ``pos``, each cut to
    ``max_length`` ids, or, with ``unit_end_id`` (ids of sentences, each closed by that id), to ``max_length``
    sentences; ``None`` when it cannot be split (the heading of ``pos`` missing, or an empty part)."""
    if isinstance(pos, float):
        ids = _joined([ids for _, ids in fields])
        cut = round(pos * len(ids))
        former, latter = ids[:cut], ids[cut:]
    else:
        target = "title" if pos == "title" else pos[len("before:"):].strip().lower()
        headings = [heading for heading, _ in fields]
        if target not in headings:
            return None
        boundary = headings.index(target) + (1 if pos == "title" else 0)
        former = _joined([ids for _, ids in fields[:boundary]])
        latter = _joined([ids for _, ids in fields[boundary:]])
    if not len(former) or not len(latter):
        return None
    return _cut(former, max_length, unit_end_id), _cut(latter, max_length, unit_end_id)


def _cut(ids: np.ndarray, max_length: int, unit_end_id: int | None) -> list[int]:
    """The first ``max_length`` ids, or with ``unit_end_id`` the ids of the first ``max_length`` units."""
    if unit_end_id is None:
        return ids[:max_length].tolist()
    ends = np.flatnonzero(ids == unit_end_id)
    return (ids[:ends[max_length - 1] + 1] if len(ends) >= max_length else ids).tolist()


def _joined(parts: list[Sequence[int]]) -> np.ndarray:
    """(N,) int64 the ids of ``parts`` one after the other."""
    return np.concatenate([np.asarray(part, dtype=np.int64) for part in parts]) if parts else np.zeros(0, np.int64)


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
    """Trainable word vectors over the training corpus's vocabulary (paper: word2vec, 100 dimensions).

    Args:
        init: ``"word2vec"``: skip-gram word2vec trained on the training documents with gensim (window 10,
            §4.2's word2vec settings); ``"random"``: random vectors; ``"pretrained"``: the vectors of a file
            (``vectors``): the paper's word2vec(full) and GloVe(full), trained on the whole arXiv / DBLP / USPTO
            corpus, or GloVe on the task's documents, all trained outside lit_docemb.
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
    """

    def __init__(self, init: Literal["word2vec", "random", "pretrained"] = "word2vec", dim: int = 100,
                 min_count: int = 5, max_vocabulary: int | None = None, window: int = 10, epochs: int = 100,
                 workers: int = 1, seed: int = 1, vectors: str | None = None,
                 vectors_format: VectorsFormat = "word2vec_binary") -> None:
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

    def build(self, texts: Sequence[str]) -> tuple[WordTokenizer, WordVectors]:
        tokenizer = WordTokenizer.from_texts(texts, self.min_count, self.max_vocabulary)
        initial = None
        if self.init == "word2vec":
            initial = train_word2vec(texts, tokenizer, self.dim, self.window, self.epochs, self.workers, self.seed)
        elif self.init == "pretrained":
            initial = load_pretrained_vectors(self.vectors, self.vectors_format, tokenizer, self.dim, self.seed)
        return tokenizer, WordVectors(len(tokenizer), self.dim, initial)

    def restore(self, words: Sequence[str]) -> tuple[WordTokenizer, WordVectors]:
        """The tokenizer and (untrained) vectors of a saved vocabulary; the weights come from the checkpoint."""
        tokenizer = WordTokenizer(words)
        return tokenizer, WordVectors(len(tokenizer), self.dim)


class TransformerTokens:
    """A pretrained Hugging Face encoder's contextual token states, frozen (§4.5's deep language models).

    Args:
        encoder: Local folder, hub name or ``package:<module>`` of the encoder.
    """

    def __init__(self, encoder: str) -> None:
        self.encoder = encoder

    def build(self, texts: Sequence[str] = ()) -> tuple[HFTokenIds, FrozenTransformerStates]:
        return HFTokenIds(self.encoder), FrozenTransformerStates(self.encoder)


class CharacterIds:
    """Text → the UTF-8 bytes of its words (after :func:`preprocess_words`), ``first_byte_id`` + byte, each word closed
    by ``unit_end_id``: ELMo reads characters, so any word encodes, and ``max_length`` counts words
    (:func:`split_fields`)."""

    unit_end_id, first_byte_id, pad_id = 1, 2, 0

    def __len__(self) -> int:
        return 256 + self.first_byte_id

    def encode(self, text: str) -> list[int]:
        ids = []
        for word in preprocess_words(text):
            ids.extend(byte + self.first_byte_id for byte in word.encode("utf-8"))
            ids.append(self.unit_end_id)
        return ids

    def key(self) -> str:
        """The encoding's name (it has no vocabulary)."""
        return "utf-8-bytes"


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


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def preprocess_sentences(text: str) -> list[str]:
    """§4.1 for sentence embedding models: the text is cut into sentences at sentence-ending punctuation (. ! ?
    followed by whitespace) and at line breaks (a title, a paragraph) before the preprocessing, then each sentence's :func:`preprocess_words` are joined by
    spaces; sentences without a word are dropped."""
    sentences = (" ".join(preprocess_words(part)) for part in _SENTENCE_END.split(text))
    return [sentence for sentence in sentences if sentence]


class SentenceWordIds:
    """Text → the ids of its sentences' words, each sentence closed by ``unit_end_id`` (§4.1's sentences,
    :func:`preprocess_sentences`): a word's id is ``first_word_id`` plus its row in Skip-thoughts' ``dictionary.txt``
    (``UNK``'s row for a word it lacks), so any text encodes, and ``max_length`` counts sentences
    (:func:`split_fields`).

    Args:
        dictionary: The words of ``dictionary.txt`` in order.
    """

    unit_end_id, first_word_id, pad_id = 1, 2, 0

    def __init__(self, dictionary: Sequence[str]) -> None:
        self.index = {word: row + self.first_word_id for word, row in dictionary_rows(dictionary).items()}
        self.unknown_id = self.index["UNK"]
        self.fingerprint = hashlib.blake2b("\n".join(dictionary).encode(), digest_size=16).hexdigest()
        self.size = len(dictionary) + self.first_word_id

    def __len__(self) -> int:
        return self.size

    def encode(self, text: str) -> list[int]:
        ids = []
        for sentence in preprocess_sentences(text):
            ids.extend(self.index.get(word, self.unknown_id) for word in sentence.split())
            ids.append(self.unit_end_id)
        return ids

    def key(self) -> str:
        """A hash of the dictionary (what decides the ids besides the sentence and word rules)."""
        return "skip-thoughts:" + self.fingerprint


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
