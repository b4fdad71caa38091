"""CTPE's word2vec(full) / GloVe rows: word vectors read from word2vec's binary and text files and GloVe's text file."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gensim.models import KeyedVectors

from lit_docemb.errors import ConfigError
from lit_docemb.models.ctpe import WordEmbeddings

TEXTS = ["graph networks learn graph structure", "protein structure prediction with networks"] * 3
VECTORS = {"graph": [0.5, -1.0, 2.0], "networks": [1.5, 0.25, -0.5], "Protein": [3.0, 1.0, 0.0]}


def write_files(folder) -> dict[str, str]:
    keyed = KeyedVectors(vector_size=3)
    keyed.add_vectors(list(VECTORS), np.array(list(VECTORS.values()), dtype=np.float32))
    paths = {"word2vec_binary": str(folder / "full.bin"), "word2vec_text": str(folder / "full.vec"),
             "glove_text": str(folder / "glove.txt")}
    keyed.save_word2vec_format(paths["word2vec_binary"], binary=True)
    keyed.save_word2vec_format(paths["word2vec_text"], binary=False)
    (folder / "glove.txt").write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in VECTORS.items()))
    return paths


@pytest.mark.parametrize("vectors_format", ["word2vec_binary", "word2vec_text", "glove_text"])
def test_pretrained_vectors_fill_the_vocabulary_rows(tmp_path, vectors_format):
    path = write_files(tmp_path)[vectors_format]
    spec = WordEmbeddings(init="pretrained", dim=3, min_count=1, vectors=path, vectors_format=vectors_format)
    tokenizer, vectors = spec.build(TEXTS)
    table = vectors.embedding.weight if hasattr(vectors, "embedding") else next(vectors.parameters())
    for word, expected in (("graph", VECTORS["graph"]), ("networks", VECTORS["networks"]),
                           ("protein", VECTORS["Protein"])):  # "protein" found through the lower-cased key
        assert torch.equal(table[tokenizer.index[word]], torch.tensor(expected)), word
    assert table[0].eq(0).all() and table[tokenizer.index["structure"]].abs().max() < 0.5 / 3  # not in the file


def test_bad_pretrained_settings_are_one_line_errors(tmp_path):
    paths = write_files(tmp_path)
    with pytest.raises(ConfigError, match="vectors: is the file of init: pretrained"):
        WordEmbeddings(init="pretrained")
    with pytest.raises(ConfigError, match="vectors: is the file of init: pretrained"):
        WordEmbeddings(init="word2vec", vectors=paths["glove_text"])
    with pytest.raises(ConfigError, match="dim: must be the 3 dimensions of"):
        WordEmbeddings(init="pretrained", dim=100, min_count=1, vectors=paths["glove_text"],
                       vectors_format="glove_text").build(TEXTS)
    with pytest.raises(ConfigError, match="vectors: no file at"):
        WordEmbeddings(init="pretrained", dim=3, min_count=1, vectors=str(tmp_path / "none.bin")).build(TEXTS)
    with pytest.raises(ConfigError, match="is not in vectors_format 'word2vec_binary'"):
        WordEmbeddings(init="pretrained", dim=3, min_count=1, vectors=paths["glove_text"]).build(TEXTS)
