"""Classical document representations, fitted on a corpus's documents without gradient training: the baselines of
DECA's Tables 3-4 (seed paper 002: TF-IDF, LDA, W2V-AVG, PV-DBOW, PV-DM, Skip-Thought) and CTPE's Tables 2-3 (seed
paper 004: TF-IDF, LSA, LDA, avg-word2vec, avg-word2vec(full), avg-GloVe(full), doc2vec, doc2vec(ran),
avg-word2vec(ran), avg-Skip-thoughts).

Each representation is fitted once on tokenised documents and then gives an (N, D) float32 matrix for any
documents: ``fit(documents, keys)``, ``transform(documents, keys)``; ``matrix(documents, keys)`` gives the same rows
as scikit-learn reads them, sparse where the representation is (TF-IDF: a SciPy CSR matrix, never densified). A
document is a list of its words, or, for a representation whose ``unit`` is ``"sentences"`` (Skip-thoughts), a
list of its sentences (each its words joined by spaces). A key names one document (its id and a hash of its
words): paragraph vectors give a document they were fitted on its trained vector and infer one for the others;
random vectors are drawn from it. Everything is repeatable with a fixed ``seed`` (gensim with one worker thread).
scikit-learn and gensim are base requirements.

Plain classes: no Lightning, no ``torch.distributed``, no corpus names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np
import torch
from scipy import sparse
from torch import nn

from lit_docemb.errors import ConfigError, require
from lit_docemb.models.skip_thoughts import SkipThoughtsEncoder, dictionary_rows
from lit_docemb.models.word_vectors import VectorsFormat, lowered_keys, read_word_vectors, stable_hash

Words = Sequence[str]


def _as_is(words: Words) -> Words:
    """scikit-learn's analyzer for documents that are already lists of words (module level: picklable)."""
    return words


class DocumentRepresentation(ABC):
    """A document representation fitted on a corpus (see the module docstring).

    Attributes:
        unit: What a document is given as: ``"words"`` (its words) or ``"sentences"`` (its sentences, each its words
            joined by spaces).
        module: A torch module the representation computes with (``None``: none); the method that holds the
            representation registers it, so that it moves to the method's device.
    """

    unit: ClassVar[Literal["words", "sentences"]] = "words"
    module: nn.Module | None = None
    fitted: bool = False

    def fit(self, documents: Sequence[Words], keys: Sequence[str]) -> None:
        """Fits on ``documents`` (lists of words); ``keys[i]`` names ``documents[i]``."""
        if not documents:
            raise ConfigError(f"{type(self).__name__} has no document to fit on: the corpus's training documents "
                              f"are empty")
        if len(keys) != len(documents):
            raise ValueError(f"{len(keys)} keys for {len(documents)} documents")
        self._fit(documents, keys)
        self.fitted = True

    def _require_fitted(self) -> None:
        if not self.fitted:
            raise RuntimeError(f"{type(self).__name__} is not fitted yet: call fit(documents, keys) first")

    def transform(self, documents: Sequence[Words], keys: Sequence[str]) -> np.ndarray:
        """(N, D) float32 representations of ``documents`` (named by ``keys``)."""
        self._require_fitted()
        return np.asarray(self._transform(documents, keys), dtype=np.float32).reshape(len(documents), -1)

    def matrix(self, documents: Sequence[Words], keys: Sequence[str]) -> np.ndarray | sparse.csr_matrix:
        """The (N, D) rows of :meth:`transform` as scikit-learn reads them: a dense array, or a SciPy CSR matrix
        (float32) for a sparse representation, whose dense form may not fit in memory."""
        return self.transform(documents, keys)

    @abstractmethod
    def _fit(self, documents: Sequence[Words], keys: Sequence[str]) -> None: ...

    @abstractmethod
    def _transform(self, documents: Sequence[Words], keys: Sequence[str]) -> np.ndarray: ...


class TfIdf(DocumentRepresentation):
    """TF-IDF vectors (scikit-learn's ``TfidfVectorizer`` on the words: raw counts x smoothed idf, rows
    L2-normalised), one dimension per vocabulary word: DECA's TF-IDF row ("the BoW model with term frequency inverse
    document frequency as the word weights"; its Fig. 2 shows them in their original high dimension) and CTPE's
    ("the dimension of the document is the number of unique words in the dataset", cosine). :meth:`matrix` gives
    the rows as a sparse CSR matrix (about 12 bytes per word a document holds: what the probe and k-means read);
    :meth:`transform`'s dense rows take N x V x 4 bytes (20news's 18,846 documents x 42k words: 3.2 GB), so a
    method embeds them a batch at a time; ``max_features`` caps V at the most frequent words.

    Args:
        min_document_frequency: Words in fewer documents are dropped (1: every word, the papers' reading).
        max_features: Keep only this many words, the most frequent in the corpus (``None``: all).
        sublinear_term_frequency: 1 + log(tf) instead of tf.
    """

    def __init__(self, min_document_frequency: int = 1, max_features: int | None = None,
                 sublinear_term_frequency: bool = False) -> None:
        require(min_document_frequency >= 1, "min_document_frequency", ">= 1", min_document_frequency)
        require(max_features is None or max_features >= 1, "max_features", ">= 1 or null", max_features)
        self.min_document_frequency, self.max_features = min_document_frequency, max_features
        self.sublinear_term_frequency = sublinear_term_frequency
        self.vectorizer = None

    def _fit(self, documents: Sequence[Words], keys: Sequence[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer = TfidfVectorizer(analyzer=_as_is, min_df=self.min_document_frequency,
                                          max_features=self.max_features, sublinear_tf=self.sublinear_term_frequency,
                                          dtype=np.float32)
        self.vectorizer.fit(documents)

    def matrix(self, documents: Sequence[Words], keys: Sequence[str]) -> sparse.csr_matrix:
        self._require_fitted()
        return self.vectorizer.transform(documents).tocsr()  # (N, V) sparse, float32

    def _transform(self, documents: Sequence[Words], keys: Sequence[str]) -> np.ndarray:
        return self.vectorizer.transform(documents).toarray()  # (N, V)


class _BagsOfWords:
    """gensim's dictionary of the fitted documents (words in fewer than ``min_document_frequency`` documents dropped)
    and the bags of words it makes."""

    def __init__(self, documents: Sequence[Words], min_document_frequency: int) -> None:
        from gensim.corpora import Dictionary

        self.dictionary = Dictionary(documents)
        self.dictionary.filter_extremes(no_below=min_document_frequency, no_above=1.0, keep_n=None)

    def __call__(self, documents: Sequence[Words]) -> list[list[tuple[int, int]]]:
        return [self.dictionary.doc2bow(list(words)) for words in documents]


class LatentSemanticAnalysis(DocumentRepresentation):
    """LSA (Deerwester et al. 1990) as CTPE ran it: gensim's ``LsiModel`` ("the number of topics and iterations to
    100. Other parameters are consistent with gensim's default settings", §4.3) over gensim's TF-IDF
    (``TfidfModel`` with its defaults: raw counts times log2 idf, rows L2-normalised) of the bag of words. A
    document is its TF-IDF vector projected on the top ``dimension`` left singular vectors of the term-document
    matrix; "iterations" is read as ``LsiModel``'s ``power_iters`` (gensim's default 2), its only iteration count.

    Args:
        dimension: Topics (singular vectors) kept (CTPE: 100).
        iterations: Power iterations of gensim's randomized SVD (CTPE config: 100).
        min_document_frequency: Words in fewer documents are dropped (1: every word).
        seed: ``LsiModel``'s random seed.
    """

    def __init__(self, dimension: int = 100, iterations: int = 2, min_document_frequency: int = 1,
                 seed: int = 1) -> None:
        require(dimension >= 1, "dimension", ">= 1", dimension)
        require(iterations >= 0, "iterations", ">= 0", iterations)
        require(min_document_frequency >= 1, "min_document_frequency", ">= 1", min_document_frequency)
        self.dimension, self.iterations, self.seed = dimension, iterations, seed
        self.min_document_frequency = min_document_frequency
        self.bags = self.tfidf = self.model = None

    def _fit(self, documents: Sequence[Words], keys: Sequence[str]) -> None:
        from gensim.models import LsiModel, TfidfModel

        self.bags = _BagsOfWords(documents, self.min_document_frequency)
        bags = self.bags(documents)
        rank = min(self.dimension, len(self.bags.dictionary) - 1, len(bags))
        if rank < 1:
            raise ConfigError(f"LatentSemanticAnalysis: {len(self.bags.dictionary)} vocabulary word(s) in "
                              f"{len(bags)} documents, too few for an SVD: fit it on a larger corpus")
        self.tfidf = TfidfModel(bags)
        self.model = LsiModel(self.tfidf[bags], num_topics=rank, id2word=self.bags.dictionary,
                              power_iters=self.iterations, random_seed=self.seed)

    def _transform(self, documents: Sequence[Words], keys: Sequence[str]) -> np.ndarray:
        from gensim.matutils import corpus2dense

        vectors = self.model[self.tfidf[self.bags(documents)]]
        return corpus2dense(vectors, self.model.num_topics, len(documents)).T  # (N, dimension)


class LatentDirichletAllocation(DocumentRepresentation):
    """LDA (Blei et al. 2003) as CTPE ran it: gensim's ``LdaModel`` on the bag of words ("the number of topics and
    iterations to 100. Other parameters are consistent with gensim's default settings", §4.3: one pass, symmetric
    priors, chunks of 2,000 documents); DECA does not say, and is run the same way. A document is its topic mixture
    (gensim's variational posterior, normalised: each row sums to 1, no topic dropped below a minimum probability),
    inferred with the same random state for every call, so the same documents always get the same vectors.

    Args:
        topics: Number of topics, the dimension (100).
        passes: Passes over the corpus (gensim's default 1).
        iterations: Variational E-step iterations per document (gensim's ``iterations``; CTPE: 100).
        min_document_frequency: Words in fewer documents are dropped.
        seed: ``LdaModel``'s random state (topic initialisation, and each inference's start).
    """

    def __init__(self, topics: int = 100, passes: int = 1, iterations: int = 50,
                 min_document_frequency: int = 1, seed: int = 1) -> None:
        require(topics >= 1, "topics", ">= 1", topics)
        require(passes >= 1, "passes", ">= 1", passes)
        require(iterations >= 1, "iterations", ">= 1", iterations)
        require(min_document_frequency >= 1, "min_document_frequency", ">= 1", min_document_frequency)
        self.topics, self.passes, self.iterations = topics, passes, iterations
        self.min_document_frequency, self.seed = min_document_frequency, seed
        self.bags = self.model = None

    def _fit(self, documents: Sequence[Words], keys: Sequence[str]) -> None:
        from gensim.models import LdaModel

        self.bags = _BagsOfWords(documents, self.min_document_frequency)
        self.model = LdaModel(self.bags(documents), num_topics=self.topics, id2word=self.bags.dictionary,
                              passes=self.passes, iterations=self.iterations, random_state=self.seed)

    def _transform(self, documents: Sequence[Words], keys: Sequence[str]) -> np.ndarray:
        self.model.random_state = np.random.RandomState(self.seed)  # each inference starts from the same draws
        gamma, _ = self.model.inference(self.bags(documents))  # (N, topics) unnormalised posterior
        return (gamma / gamma.sum(1, keepdims=True)).astype(np.float32)


class WordVectorAverage(DocumentRepresentation):
    """A document is the mean of the vectors of its words that have one (words without a vector are skipped; a
    document without any is the zero vector). The vectors: word2vec trained on the fitted documents (gensim; DECA's
    W2V-AVG, CTPE's avg-word2vec: 100 dimensions, skip-gram, window 10, 100 iterations as CTPE §4.3 states; DECA
    gives no setting) or read from a pretrained file (``vectors``: CTPE's avg-word2vec(full) from a word2vec binary,
    avg-GloVe(full) / avg-GloVe from GloVe's text; a word is looked up as is, then lower-cased).

    Args:
        vectors: A word-vector file (``None``: train word2vec on the documents).
        vectors_format: ``word2vec_binary``, ``word2vec_text`` or ``glove_text`` (see
            :func:`~lit_docemb.models.word_vectors.read_word_vectors`).
        dimension: word2vec's vector size (a file's own size is used as is).
        window: word2vec's window.
        epochs: word2vec's iterations over the documents.
        skip_gram: Skip-gram (``True``) or CBOW.
        min_count: word2vec ignores words seen fewer times (gensim's default, 5).
        workers: word2vec threads; 1 makes the vectors repeatable.
        seed: word2vec's seed.
    """

    def __init__(self, vectors: str | None = None, vectors_format: VectorsFormat = "word2vec_binary",
                 dimension: int = 100, window: int = 10, epochs: int = 100, skip_gram: bool = True,
                 min_count: int = 5, workers: int = 1, seed: int = 1) -> None:
        for name, value in (("dimension", dimension), ("window", window), ("epochs", epochs),
                            ("min_count", min_count), ("workers", workers)):
            require(value >= 1, name, ">= 1", value)
        self.vectors, self.vectors_format = vectors, vectors_format
        self.dimension, self.window, self.epochs, self.skip_gram = dimension, window, epochs, skip_gram
        self.min_count, self.workers, self.seed = min_count, workers, seed
        self.keyed_vectors = None
        self.lowered: dict[str, str] = {}
        if vectors is not None:  # a missing file stops when the config is built, before any corpus is read
            self.keyed_vectors = read_word_vectors(vectors, vectors_format)
            self.lowered = lowered_keys(self.keyed_vectors)

    def _fit(self, documents: Sequence[Words], keys: Sequence[str]) -> None:
        if self.vectors is not None:
            return
        from gensim.models import Word2Vec

        sentences = [list(words) for words in documents if words]
        if not sentences:
            raise ConfigError("WordVectorAverage: the documents have no word to train word2vec on")
        self.keyed_vectors = Word2Vec(sentences, vector_size=self.dimension, window=self.window, epochs=self.epochs,
                                      sg=int(self.skip_gram), min_count=self.min_count, workers=self.workers,
                                      seed=self.seed, hashfxn=stable_hash).wv

    def _key(self, word: str) -> str | None:
        if word in self.keyed_vectors.key_to_index:
            return word
        return self.lowered.get(word.lower())

    def _transform(self, documents: Sequence[Words], keys: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(documents), self.keyed_vectors.vector_size), dtype=np.float32)  # (N, D)
        for row, words in enumerate(documents):
            known = [key for key in map(self._key, words) if key is not None]
            if known:
                out[row] = self.keyed_vectors[known].mean(axis=0)
        return out


class ParagraphVectors(DocumentRepresentation):
    """Paragraph vectors (Le and Mikolov 2014, gensim's ``Doc2Vec``): PV-DBOW (``mode: dbow``) or PV-DM (``dm``).
    A document the model was fitted on is its trained vector; any other is inferred (gensim's ``infer_vector``,
    ``epochs`` passes, seeded by its key, so the same document always gets the same vector). CTPE's doc2vec row:
    PV-DM, 100 dimensions, window 10, 50 iterations (§4.3); DECA's PV-DBOW and PV-DM rows give no setting: the same.

    Args:
        mode: ``dbow`` (distributed bag of words) or ``dm`` (distributed memory).
        dimension: Vector size (100).
        window: Context window (PV-DM; PV-DBOW only with ``train_words``).
        epochs: Training and inference passes.
        min_count: Words seen fewer times are ignored (gensim's default, 5).
        train_words: PV-DBOW only: also train skip-gram word vectors (gensim's ``dbow_words``).
        workers: Threads; 1 makes the vectors repeatable.
        seed: gensim's seed (and, with each document's key, that of its inference).
    """

    def __init__(self, mode: Literal["dbow", "dm"] = "dm", dimension: int = 100, window: int = 10,
                 epochs: int = 50, min_count: int = 5, train_words: bool = False, workers: int = 1,
                 seed: int = 1) -> None:
        require(mode in ("dbow", "dm"), "mode", "'dbow' or 'dm'", mode)
        for name, value in (("dimension", dimension), ("window", window), ("epochs", epochs),
                            ("min_count", min_count), ("workers", workers)):
            require(value >= 1, name, ">= 1", value)
        self.mode, self.dimension, self.window, self.epochs = mode, dimension, window, epochs
        self.min_count, self.train_words, self.workers, self.seed = min_count, train_words, workers, seed
        self.model = None
        self.row_of: dict[str, int] = {}

    def _fit(self, documents: Sequence[Words], keys: Sequence[str]) -> None:
        from gensim.models.doc2vec import Doc2Vec, TaggedDocument

        self.row_of = {}
        for key in keys:
            self.row_of.setdefault(key, len(self.row_of))
        tagged = [TaggedDocument(list(words), [self.row_of[key]]) for words, key in zip(documents, keys)]
        self.model = Doc2Vec(tagged, dm=int(self.mode == "dm"), vector_size=self.dimension, window=self.window,
                             epochs=self.epochs, min_count=self.min_count, dbow_words=int(self.train_words),
                             workers=self.workers, seed=self.seed, hashfxn=stable_hash)

    def _transform(self, documents: Sequence[Words], keys: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(documents), self.dimension), dtype=np.float32)  # (N, D)
        for row, (words, key) in enumerate(zip(documents, keys)):
            if key in self.row_of:
                out[row] = self.model.dv[self.row_of[key]]
            else:  # gensim draws its negative samples from model.random: reseeded per document, order-free
                self.model.random = np.random.RandomState(stable_hash(f"{self.seed}:{key}"))
                out[row] = self.model.infer_vector(list(words))
        return out


class RandomVectors(DocumentRepresentation):
    """CTPE's random baselines (§4.2, uniform): ``level: document`` gives each document its own random vector
    (doc2vec(ran)); ``level: word`` gives each word one and a document the mean of its words' (avg-word2vec(ran)).
    A vector is drawn uniformly in [-1, 1) from a generator seeded by ``seed`` and the document's key or the word,
    so it does not depend on the order or company in which documents are embedded.

    Args:
        level: ``document`` or ``word``.
        dimension: Vector size (CTPE: 100).
        seed: Seed mixed into every draw.
    """

    def __init__(self, level: Literal["document", "word"] = "document", dimension: int = 100, seed: int = 1) -> None:
        require(level in ("document", "word"), "level", "'document' or 'word'", level)
        require(dimension >= 1, "dimension", ">= 1", dimension)
        self.level, self.dimension, self.seed = level, dimension, seed
        self.word_vectors: dict[str, np.ndarray] = {}  # drawn once per word

    def _fit(self, documents: Sequence[Words], keys: Sequence[str]) -> None:
        """Nothing to fit: the vectors are functions of the keys and words."""

    def _draw(self, name: str) -> np.ndarray:
        generator = np.random.default_rng(stable_hash(f"{self.seed}:{self.level}:{name}"))
        return generator.uniform(-1.0, 1.0, self.dimension)  # (D,)

    def _word(self, word: str) -> np.ndarray:
        if word not in self.word_vectors:
            self.word_vectors[word] = self._draw(word)
        return self.word_vectors[word]

    def _transform(self, documents: Sequence[Words], keys: Sequence[str]) -> np.ndarray:
        if self.level == "document":
            return np.stack([self._draw(key) for key in keys])  # (N, D)
        out = np.zeros((len(documents), self.dimension))
        for row, words in enumerate(documents):
            if words:
                out[row] = np.mean([self._word(word) for word in words], axis=0)
        return out


class SkipThoughtAverage(DocumentRepresentation):
    """A document is the mean of the Skip-thoughts vectors of its sentences (Kiros et al. 2015; the generic
    combine-skip model, 4,800 dimensions, with the EOS token, frozen: :mod:`lit_docemb.models.skip_thoughts` reads
    the authors' release). CTPE's avg-Skip-thoughts (§4.3: "the average of the sentence embeddings in the document is
    represented as the embedding of the document") and DECA's Skip-Thought row (Table 3, 20news and IMDB; DECA says
    only "an RNN-based encoder": the document vector is read here as CTPE's mean). Nothing is fitted on the corpus.
    Sentences are given by the caller (``unit: sentences``); a word outside ``dictionary.txt`` is ``UNK``'s row, a
    document without a sentence the zero vector. The encoder runs where :attr:`module` is (the method's device), on
    sentences sorted by length, as many at a time as ``batch_words`` padded word positions hold (a longer sentence
    alone): the GRUs' gate inputs of a pass take about ``batch_words`` x 9,600 x 4 bytes (uni-skip's and bi-skip's).

    Args:
        folder: The folder of the release (``uni_skip.npz``, ``uni_skip.npz.pkl``, ``bi_skip.npz``,
            ``bi_skip.npz.pkl``, ``utable.npy``, ``btable.npy``, ``dictionary.txt``), read when this is built.
        batch_words: Padded word positions (sentences x the longest one's words) per forward pass.
    """

    unit = "sentences"

    def __init__(self, folder: str, batch_words: int = 16384) -> None:
        require(batch_words >= 1, "batch_words", ">= 1", batch_words)
        self.folder, self.batch_words = folder, batch_words
        self.module, dictionary = SkipThoughtsEncoder.from_folder(folder)  # a missing file stops in one line here
        self.row_of = dictionary_rows(dictionary)
        self.unknown_row = self.row_of["UNK"]

    def _fit(self, documents: Sequence[Words], keys: Sequence[str]) -> None:
        """Nothing to fit: the released model is used as is."""

    def _transform(self, documents: Sequence[Words], keys: Sequence[str]) -> np.ndarray:
        sentences = [(row, [self.row_of.get(w, self.unknown_row) for w in sentence.split()])
                     for row, document in enumerate(documents) for sentence in document]
        sentences = [(row, rows) for row, rows in sentences if rows]
        sentences.sort(key=lambda item: len(item[1]))
        device = self.module.uni_table.device
        total = torch.zeros(len(documents), self.module.dim, dtype=torch.float64, device=device)  # (N, 4800)
        counts = torch.zeros(len(documents), dtype=torch.float64, device=device)
        with torch.no_grad():
            for batch in self._batches(sentences):
                lengths = torch.tensor([len(rows) for _, rows in batch], device=device)
                word_rows = torch.zeros(len(batch), int(lengths.max()), dtype=torch.long, device=device)  # (S, L)
                for i, (_, rows) in enumerate(batch):
                    word_rows[i, :len(rows)] = torch.tensor(rows, device=device)
                owners = torch.tensor([row for row, _ in batch], device=device)
                total.index_add_(0, owners, self.module(word_rows, lengths).double())  # (S, 4800) into (N, 4800)
                counts.index_add_(0, owners, torch.ones(len(batch), dtype=torch.float64, device=device))
        return (total / counts.clamp(min=1).unsqueeze(1)).cpu().numpy()  # (N, 4800)

    def _batches(self, sentences: list[tuple[int, list[int]]]):
        """Consecutive runs of the length-sorted ``sentences`` whose padded size stays within ``batch_words``."""
        start = 0
        while start < len(sentences):
            end = start + 1
            while end < len(sentences) and (end + 1 - start) * len(sentences[end][1]) <= self.batch_words:
                end += 1
            yield sentences[start:end]
            start = end
