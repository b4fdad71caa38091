"""GloVe (lit_docemb.models.glove) and the word-vector files that CTPE's init: pretrained reads: co-occurrence counts
and one AdaGrad pass against naive references, learning on a corpus with planted topics (word2vec too), and the
written file read back into CTPE's word vectors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lit_docemb.models.ctpe import WordEmbeddings
from lit_docemb.models.glove import GloVe, cooccurrence_counts, train_glove, vocabulary
from lit_docemb.models.word_vectors import WordSentences, read_word_vectors, train_word_vectors, write_word_vectors

TOPICS = [["ant", "bee", "wasp", "moth", "gnat"], ["car", "bus", "van", "taxi", "tram"],
          ["oak", "elm", "ash", "fir", "yew"]]


def planted_corpus(documents: int = 400, length: int = 12, seed: int = 0) -> list[list[str]]:
    """Documents whose words all come from one of three topics: words co-occur only within their topic."""
    rng = np.random.default_rng(seed)
    return [list(rng.choice(TOPICS[rng.integers(len(TOPICS))], length)) for _ in range(documents)]


def topic_margin(words: list[str], vectors: np.ndarray) -> float:
    """Mean cosine of same-topic word pairs minus that of different-topic pairs."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    index = {w: i for i, w in enumerate(words)}
    topic = {w: t for t, ws in enumerate(TOPICS) for w in ws}
    same, other = [], []
    for a in topic:
        for b in topic:
            if a < b:
                (same if topic[a] == topic[b] else other).append(float(unit[index[a]] @ unit[index[b]]))
    return np.mean(same) - np.mean(other)


def naive_counts(sentences, words, window):
    index = {w: i for i, w in enumerate(words)}
    counts = np.zeros((len(words), len(words)))
    for sentence in sentences:
        ids = [index[w] for w in sentence if w in index]  # out-of-vocabulary words dropped before windowing
        for i in range(len(ids)):
            for j in range(i + 1, min(i + window + 1, len(ids))):
                counts[ids[i], ids[j]] += 1.0 / (j - i)
                counts[ids[j], ids[i]] += 1.0 / (j - i)
    return counts


def test_vocabulary_by_count_then_alphabet():
    assert vocabulary([["b", "a", "c", "b"], ["a", "b", "d"]], min_count=2) == ["b", "a"]
    assert vocabulary([["b", "a", "c", "b"]], min_count=1, max_size=2) == ["b", "a"]


@pytest.mark.parametrize("chunk_tokens", [3, 10_000])
def test_cooccurrence_counts_are_the_naive_windowed_counts(chunk_tokens):
    sentences = [["a", "rare", "b", "a", "c"], ["c", "b"], ["a"], ["b", "c", "a", "b", "rare", "c", "a"]]
    words = ["a", "b", "c"]
    counts = cooccurrence_counts(sentences, words, window=2, chunk_tokens=chunk_tokens).toarray()
    np.testing.assert_allclose(counts, naive_counts(sentences, words, 2))
    assert counts[0, 1] == pytest.approx(1 + 1 + 0.5 + 1 + 0.5)  # no pair across documents, "rare" skipped


def reference_pass(model: GloVe, order: np.ndarray) -> float:
    """glove.c's update, one entry at a time, written out with numpy vectors."""
    cost = 0.0
    for k in order:
        i, j = model.rows[k], model.cols[k]
        w, c = model.vectors[i].copy(), model.contexts[j].copy()
        diff = w @ c + model.biases[i] + model.context_biases[j] - model.log_counts[k]
        fdiff = model.weights[k] * diff
        cost += 0.5 * fdiff * diff
        fdiff *= model.learning_rate
        model.vectors[i] -= fdiff * c / np.sqrt(model.squares[i])
        model.contexts[j] -= fdiff * w / np.sqrt(model.context_squares[j])
        model.squares[i] += (fdiff * c) ** 2
        model.context_squares[j] += (fdiff * w) ** 2
        model.biases[i] -= fdiff / math.sqrt(model.bias_squares[i])
        model.context_biases[j] -= fdiff / math.sqrt(model.context_bias_squares[j])
        model.bias_squares[i] += fdiff ** 2
        model.context_bias_squares[j] += fdiff ** 2
    return cost / len(order)


def test_one_compiled_pass_is_the_reference_update():
    sentences = planted_corpus(30)
    words = vocabulary(sentences, 1)
    counts = cooccurrence_counts(sentences, words, 5)
    compiled, reference = GloVe(counts, dim=6, seed=3), GloVe(counts, dim=6, seed=3)
    assert reference.weights.max() <= 1.0 and reference.weights.min() < 1.0  # f(x) = min(1, (x / 100)^0.75)
    compiled.rng, reference_order = np.random.default_rng(7), np.random.default_rng(7).permutation(counts.nnz)
    cost = compiled.epoch()
    assert cost == pytest.approx(reference_pass(reference, reference_order), rel=1e-9)
    for name in ("vectors", "contexts", "biases", "context_biases", "squares", "bias_squares"):
        np.testing.assert_allclose(getattr(compiled, name), getattr(reference, name), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("workers", [1, 2])
def test_glove_learns_the_planted_topics(workers):
    words, vectors, costs = train_glove(planted_corpus(), dim=10, window=5, epochs=25, min_count=1, workers=workers)
    assert vectors.shape == (15, 10) and vectors.dtype == np.float32
    assert costs[-1] < costs[0] / 20 and all(b <= a * 1.05 for a, b in zip(costs, costs[1:]))
    assert topic_margin(words, vectors) > 0.5


def test_glove_is_repeatable_with_one_worker():
    first = train_glove(planted_corpus(50), dim=4, window=3, epochs=3, min_count=1, seed=5)
    second = train_glove(planted_corpus(50), dim=4, window=3, epochs=3, min_count=1, seed=5)
    assert first[0] == second[0] and np.array_equal(first[1], second[1])


def test_word2vec_learns_the_planted_topics():
    words, vectors = train_word_vectors(planted_corpus(), "word2vec", dim=10, window=5, epochs=10, min_count=1)
    assert sorted(words) == sorted(w for ws in TOPICS for w in ws)
    assert topic_margin(words, vectors) > 0.3


def test_sentences_are_reread_and_preprocessed():
    sentences = WordSentences(lambda: iter(["<b>Ant</b> BEE, 42", "", "car-bus"]))
    assert list(sentences) == [["ant", "bee"], ["car", "bus"]] == list(sentences)


@pytest.mark.parametrize("vectors_format", ["word2vec_binary", "word2vec_text", "glove_text"])
def test_trained_vectors_round_trip_into_ctpe(tmp_path, vectors_format):
    words, vectors = train_word_vectors(planted_corpus(60), "glove", dim=6, window=5, epochs=3, min_count=1)
    path = str(tmp_path / "vectors")
    write_word_vectors(path, words, vectors, vectors_format)
    assert read_word_vectors(path, vectors_format).index_to_key == words
    texts = [" ".join(s) for s in planted_corpus(20, seed=1)]
    tokenizer, table = WordEmbeddings("pretrained", dim=6, min_count=1, vectors=path,
                                      vectors_format=vectors_format).build(texts)
    for word in ("ant", "taxi", "yew"):
        expected = torch.from_numpy(vectors[words.index(word)])
        assert torch.allclose(table.embedding.weight[tokenizer.index[word]], expected, atol=1e-5), word
