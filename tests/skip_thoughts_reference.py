"""A step-by-step NumPy Skip-thoughts encoder (Theano's ``gru_layer``, one word at a time, float64) over a release in
the authors' layout (:func:`corpus_files.write_skip_thoughts_release`): the naive reference that the plain-torch
encoder of ``lit_docemb/models/skip_thoughts.py`` is checked against."""

from __future__ import annotations

import numpy as np


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_gru(params, prefix: str, inputs: list[np.ndarray]) -> np.ndarray:
    """Theano gru_layer: [r, u] = sigmoid(x W + b + h U), h~ = tanh(x Wx + bx + r * (h Ux)), h = u h + (1 - u) h~."""
    W, b, U = params[f"{prefix}_W"], params[f"{prefix}_b"], params[f"{prefix}_U"]
    Wx, bx, Ux = params[f"{prefix}_Wx"], params[f"{prefix}_bx"], params[f"{prefix}_Ux"]
    dim = Ux.shape[0]
    h = np.zeros(dim)
    for x in inputs:
        preact = x @ W + b + h @ U
        r, u = sigmoid(preact[:dim]), sigmoid(preact[dim:])
        candidate = np.tanh(x @ Wx + bx + r * (h @ Ux))
        h = u * h + (1 - u) * candidate
    return h


def reference_vector(folder, sentence: str) -> np.ndarray:
    """Combine-skip with the EOS token: [uni / |uni|; bi / |bi|] of one sentence."""
    dictionary = (folder / "dictionary.txt").read_text().split("\n")[:-1]
    position = {w: i for i, w in enumerate(dictionary)}
    utable = np.load(folder / "utable.npy", allow_pickle=True)  # the test's own files: trusted here
    btable = np.load(folder / "btable.npy", allow_pickle=True)
    rows = [position.get(w, position["UNK"]) for w in sentence.split()] + [position["<eos>"]]
    uni_params, bi_params = np.load(folder / "uni_skip.npz"), np.load(folder / "bi_skip.npz")
    uni = reference_gru(uni_params, "encoder", [utable[r].astype(np.float64) for r in rows])
    b_inputs = [btable[r].astype(np.float64) for r in rows]
    bi = np.concatenate([reference_gru(bi_params, "encoder", b_inputs),
                         reference_gru(bi_params, "encoder_r", b_inputs[::-1])])
    return np.concatenate([uni / np.linalg.norm(uni), bi / np.linalg.norm(bi)])
