"""The classical representations of lit_docemb/models/classical.py against naive references on a tiny corpus."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import sparse

from lit_docemb.errors import ConfigError
from lit_docemb.models.classical import (
    LatentDirichletAllocation,
    LatentSemanticAnalysis,
    ParagraphVectors,
    RandomVectors,
    TfIdf,
    WordVectorAverage,
)

TOPICS = {"sea": "ocean tide wave salt harbour ship anchor sailor", "code": "python compiler function loop variable "
          "parser module thread"}


def corpus(n_per_topic: int = 6) -> tuple[list[list[str]], list[str]]:
    """Documents of two disjoint vocabularies (12 words each), and their keys."""
    documents, keys = [], []
    for name, vocabulary in TOPICS.items():
        words = vocabulary.split()
        for i in range(n_per_topic):
            documents.append([words[(i * 3 + j) % len(words)] for j in range(12)])
            keys.append(f"{name}{i}")
    return documents, keys


def naive_tfidf(documents: list[list[str]]) -> tuple[np.ndarray, list[str]]:
    """tf x (ln((1 + N) / (1 + df)) + 1), rows L2-normalised, columns in alphabetical order."""
    vocabulary = sorted({w for words in documents for w in words})
    df = Counter(w for words in documents for w in set(words))
    n = len(documents)
    rows = []
    for words in documents:
        counts = Counter(words)
        row = np.array([counts[w] * (math.log((1 + n) / (1 + df[w])) + 1) for w in vocabulary])
        rows.append(row / np.linalg.norm(row))
    return np.stack(rows), vocabulary


def fitted(representation, documents, keys):
    representation.fit(documents, keys)
    return representation


def test_tfidf_equals_the_formula():
    documents, keys = corpus()
    documents[0] = documents[0] + ["ocean", "ocean"]  # a repeated word: term frequency above 1
    expected, vocabulary = naive_tfidf(documents)
    vectors = fitted(TfIdf(), documents, keys).transform(documents, keys)
    assert vectors.dtype == np.float32 and vectors.shape == (len(documents), len(vocabulary))
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    matrix = fitted(TfIdf(), documents, keys).matrix(documents, keys)  # what the probe and k-means read
    assert sparse.isspmatrix_csr(matrix) and matrix.dtype == np.float32 and matrix.nnz == (vectors > 0).sum()
    np.testing.assert_array_equal(matrix.toarray(), vectors)
    unseen = TfIdf(max_features=3)
    assert fitted(unseen, documents, keys).transform([["ocean", "unknown"]], ["new"]).shape == (1, 3)


def gensim_default_tfidf(documents: list[list[str]]) -> tuple[np.ndarray, list[str]]:
    """gensim's default TF-IDF written out: raw count times log2(N / df), each row L2-normalised."""
    vocabulary = sorted({w for d in documents for w in d})
    counts = np.array([[d.count(w) for w in vocabulary] for d in documents], dtype=np.float64)
    weights = counts * np.log2(len(documents) / (counts > 0).sum(0))
    return weights / np.linalg.norm(weights, axis=1, keepdims=True), vocabulary


def test_lsa_is_the_truncated_svd_of_gensims_default_tfidf_matrix():
    """CTPE's LSA: gensim's LsiModel over gensim's default TF-IDF; a document's coordinates are its rows of
    U_k S_k (each column up to its sign), and the rank-r projection rebuilds the matrix."""
    rng = np.random.default_rng(0)  # uneven documents: distinct singular values, so the top-k subspace is unique
    vocabulary = (TOPICS["sea"] + " " + TOPICS["code"]).split()
    documents = [list(rng.choice(vocabulary, size=int(rng.integers(3, 15)))) for _ in range(10)]
    keys = [str(i) for i in range(10)]
    matrix, _ = gensim_default_tfidf(documents)
    left, singular, _ = np.linalg.svd(matrix, full_matrices=False)
    lsa = fitted(LatentSemanticAnalysis(dimension=3, iterations=30, seed=0), documents, keys)
    coordinates = lsa.transform(documents, keys)  # (N, 3)
    np.testing.assert_allclose(np.abs(coordinates), np.abs(left[:, :3] * singular[:3]), atol=1e-4)
    rank = int(np.linalg.matrix_rank(matrix))
    full = fitted(LatentSemanticAnalysis(dimension=rank, iterations=30, seed=0), documents, keys)
    np.testing.assert_allclose(np.linalg.norm(full.transform(documents, keys), axis=1), 1.0, atol=1e-4)  # no loss


def test_lda_gives_topic_mixtures_that_separate_the_vocabularies_and_repeat_with_a_seed():
    documents, keys = corpus()
    mixtures = fitted(LatentDirichletAllocation(topics=2, seed=3), documents, keys).transform(documents, keys)
    assert mixtures.shape == (12, 2)
    np.testing.assert_allclose(mixtures.sum(1), 1.0, atol=1e-5)
    dominant = mixtures.argmax(1)
    assert len(set(dominant[:6])) == 1 and len(set(dominant[6:])) == 1 and dominant[0] != dominant[6]
    again = fitted(LatentDirichletAllocation(topics=2, seed=3), documents, keys).transform(documents, keys)
    np.testing.assert_array_equal(mixtures, again)


def write_vectors(path, vectors: dict[str, list[float]], binary: bool) -> None:
    from gensim.models import KeyedVectors

    keyed = KeyedVectors(vector_size=len(next(iter(vectors.values()))))
    keyed.add_vectors(list(vectors), np.array(list(vectors.values()), dtype=np.float32))
    keyed.save_word2vec_format(str(path), binary=binary)


@pytest.mark.parametrize("vectors_format", ["word2vec_binary", "glove_text"])
def test_word_vector_average_is_the_mean_of_the_files_vectors_of_the_known_words(tmp_path, vectors_format):
    table = {"Ocean": [1.0, 0.0, 2.0], "tide": [3.0, 4.0, 0.0], "ship": [0.0, 2.0, 2.0]}
    path = tmp_path / "vectors"
    if vectors_format == "glove_text":  # GloVe's text: no header line
        path.write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in table.items()))
    else:
        write_vectors(path, table, binary=True)
    average = fitted(WordVectorAverage(vectors=str(path), vectors_format=vectors_format), [["x"]], ["x"])
    documents = [["ocean", "tide", "tide", "unknownword"], ["nothing", "known"], ["ship"]]
    vectors = average.transform(documents, ["a", "b", "c"])
    expected = np.array([np.mean([table["Ocean"], table["tide"], table["tide"]], axis=0), [0.0, 0.0, 0.0],
                         table["ship"]])
    np.testing.assert_allclose(vectors, expected, atol=1e-6)


def test_a_missing_vectors_file_names_the_argument(tmp_path):
    with pytest.raises(ConfigError, match="vectors: no file at"):
        WordVectorAverage(vectors=str(tmp_path / "absent.bin"))


def test_trained_word2vec_average_repeats_with_a_seed_and_differs_with_another():
    documents, keys = corpus()

    def vectors(seed: int) -> np.ndarray:
        average = WordVectorAverage(dimension=8, window=3, epochs=5, min_count=1, seed=seed)
        return fitted(average, documents, keys).transform(documents, keys)

    first = vectors(1)
    assert first.shape == (12, 8) and np.isfinite(first).all()
    np.testing.assert_array_equal(first, vectors(1))
    assert not np.allclose(first, vectors(2))


@pytest.mark.parametrize("mode", ["dbow", "dm"])
def test_paragraph_vectors_repeat_with_a_seed_and_keep_documents_apart(mode):
    documents, keys = corpus()

    def model(seed: int) -> ParagraphVectors:
        return fitted(ParagraphVectors(mode, dimension=8, window=3, epochs=10, min_count=1, seed=seed), documents,
                      keys)

    first = model(1)
    vectors = first.transform(documents, keys)
    np.testing.assert_array_equal(vectors, model(1).transform(documents, keys))
    assert not np.allclose(vectors, model(2).transform(documents, keys))
    np.testing.assert_array_equal(vectors[0], first.model.dv[0])  # a fitted document is its trained vector
    distances = np.linalg.norm(vectors[:, None] - vectors[None], axis=-1)
    assert (distances[~np.eye(12, dtype=bool)] > 1e-6).all()  # distinct documents, distinct vectors
    unseen = [documents[0][::-1], documents[7][:5]]
    inferred = first.transform(unseen, ["new0", "new1"])
    np.testing.assert_array_equal(inferred[::-1], first.transform(unseen[::-1], ["new1", "new0"]))
    assert not np.allclose(inferred[0], inferred[1])


def test_random_vectors_depend_on_the_key_or_words_only():
    documents, keys = corpus(2)
    per_document = fitted(RandomVectors("document", dimension=5, seed=4), documents, keys)
    vectors = per_document.transform(documents, keys)
    np.testing.assert_array_equal(vectors[::-1], per_document.transform(documents[::-1], keys[::-1]))
    assert np.abs(vectors).max() <= 1.0 and not np.allclose(vectors[0], vectors[1])
    per_word = fitted(RandomVectors("word", dimension=5, seed=4), documents, keys)
    averaged = per_word.transform([["a", "a", "b"], ["a"], ["b"]], ["x", "y", "z"])
    np.testing.assert_allclose(averaged[0], (2 * averaged[1] + averaged[2]) / 3, atol=1e-6)


def test_a_representation_refuses_to_transform_before_fitting_and_to_fit_nothing():
    with pytest.raises(RuntimeError, match="not fitted yet"):
        TfIdf().transform([["a"]], ["a"])
    with pytest.raises(ConfigError, match="no document to fit on"):
        TfIdf().fit([], [])
    with pytest.raises(ConfigError, match="topics: must be >= 1"):
        LatentDirichletAllocation(topics=0)
