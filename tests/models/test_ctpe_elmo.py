"""CTPE's ELMo row: the plain-torch ELMo (lit_docemb/models/elmo.py) read from a tiny release in allennlp's file layout
(options json + hdf5 with the real dataset names), checked against a step-by-step numpy reference written from the
equations; CTPE fit / CTPE0 / avg through the real CLI; bad files stop in one line naming the file."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch
from corpus_files import ELMO_TINY_OPTIONS, write_elmo_release
from journeys import ctpe_task_config

from lit_docemb.commands import main
from lit_docemb.errors import ConfigError
from lit_docemb.models.ctpe import ElmoTokens
from lit_docemb.models.ctpe_tokenizers import CharacterIds
from lit_docemb.models.elmo import ElmoBiLM, character_ids
from lit_docemb.views.ctpe import split_fields


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_token_vector(h5, word: str) -> np.ndarray:
    """Char CNN (valid convolution, max over positions, relu), highway, projection: one token, float64 loops."""
    table = np.vstack([np.zeros((1, h5["char_embed"].shape[1])), h5["char_embed"][...]])
    chars = table[character_ids(word)]  # (50, char_dim)
    features = []
    for i, (width, count) in enumerate(ELMO_TINY_OPTIONS["char_cnn"]["filters"]):
        weight, bias = h5[f"CNN/W_cnn_{i}"][0].astype(np.float64), h5[f"CNN/b_cnn_{i}"][...]
        best = np.full(count, -np.inf)
        for start in range(len(chars) - width + 1):
            value = bias + sum(chars[start + k] @ weight[k] for k in range(width))
            best = np.maximum(best, value)
        features.append(np.maximum(best, 0.0))
    x = np.concatenate(features)
    for k in range(ELMO_TINY_OPTIONS["char_cnn"]["n_highway"]):
        group = h5[f"CNN_high_{k}"]
        carry = sigmoid(x @ group["W_carry"][...] + group["b_carry"][...])
        x = carry * np.maximum(x @ group["W_transform"][...] + group["b_transform"][...], 0.0) + (1 - carry) * x
    return x @ h5["CNN_proj/W_proj"][...] + h5["CNN_proj/b_proj"][...]


def reference_lstm(h5, direction: int, layer: int, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """TensorFlow's LSTMCell (i, j, f, o; forget bias 1; cell and projection clipped), one step at a time."""
    cell_clip, proj_clip = ELMO_TINY_OPTIONS["lstm"]["cell_clip"], ELMO_TINY_OPTIONS["lstm"]["proj_clip"]
    group = h5[f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"]
    weight, bias, projection = group["W_0"][...], group["B"][...], group["W_P_0"][...]
    n = ELMO_TINY_OPTIONS["lstm"]["dim"]
    h, c, outputs = np.zeros(projection.shape[1]), np.zeros(n), []
    for x in inputs:
        z = np.concatenate([x, h]) @ weight + bias
        i, j, f, o = z[:n], z[n:2 * n], z[2 * n:3 * n], z[3 * n:]
        c = np.clip(sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j), -cell_clip, cell_clip)
        h = np.clip((sigmoid(o) * np.tanh(c)) @ projection, -proj_clip, proj_clip)
        outputs.append(h)
    return outputs


def reference_layers(h5, words: list[str]) -> np.ndarray:
    """(3, len(words), 2P): [x; x], then each biLSTM layer's [forward; backward], skip connection on layer 2."""
    tokens = [reference_token_vector(h5, w) for w in ["<S>", *words, "</S>"]]
    layers = [[np.concatenate([t, t]) for t in tokens]]
    forward, backward = tokens, tokens[::-1]
    for layer in range(2):
        new_forward, new_backward = reference_lstm(h5, 0, layer, forward), reference_lstm(h5, 1, layer, backward)
        if layer > 0:
            new_forward = [a + b for a, b in zip(new_forward, forward)]
            new_backward = [a + b for a, b in zip(new_backward, backward)]
        layers.append([np.concatenate([f, b]) for f, b in zip(new_forward, new_backward[::-1])])
        forward, backward = new_forward, new_backward
    return np.array([layer[1:-1] for layer in layers])


SENTENCES = [["the", "lighthouse", "keeper", "counted", "gulls"], ["storm"], ["état", "naïve", "x" * 70]]


def test_elmo_matches_the_step_by_step_reference(tmp_path):
    options_file, weights_file = write_elmo_release(tmp_path)
    model = ElmoBiLM.from_files(str(options_file), str(weights_file)).double()
    width = max(map(len, SENTENCES))
    characters = torch.zeros(len(SENTENCES), width, 50, dtype=torch.long)
    mask = torch.zeros(len(SENTENCES), width, dtype=torch.long)
    for row, words in enumerate(SENTENCES):
        characters[row, :len(words)] = torch.tensor([character_ids(w) for w in words])
        mask[row, :len(words)] = 1
    with torch.no_grad():
        layers = model(characters, mask)  # (3, B, T, 12)
    assert layers.shape == (3, 3, width, 12)
    clipped = 0
    with h5py.File(weights_file, "r") as h5:
        for row, words in enumerate(SENTENCES):
            expected = reference_layers(h5, words)
            np.testing.assert_allclose(layers[:, row, :len(words)].numpy(), expected, atol=1e-5, rtol=0)
            clipped += int((np.abs(expected[1]) >= 0.5 - 1e-12).sum())
    assert layers[:, 1, 1:].abs().max() == 0  # padding is zero
    assert clipped > 0  # the toy weights reach the projection clip, so clipping is exercised
    assert character_ids("x" * 70)[49] == 260 and character_ids("x" * 70)[48] == 121  # 48 bytes (x = 120, plus one), end of word
    assert character_ids("<S>")[:4] == [259, 257, 260, 261]


def test_frozen_states_read_any_word_as_characters_and_refusals(tmp_path):
    options_file, weights_file = write_elmo_release(tmp_path)
    spec = ElmoTokens(str(options_file), str(weights_file), layer_mix="top")
    tokenizer, states = spec.build()
    assert isinstance(tokenizer, CharacterIds) and states.dim == 12
    first, second = tokenizer.encode("Keeper counted GULLS."), tokenizer.encode("storm came zébra" + "x" * 60)
    assert first[:7] == [ord(c) + 2 for c in "keeper"] + [1] and first.count(1) == 3
    ids = torch.tensor([first + [0] * (len(second) - len(first)), second])
    mask = (torch.arange(len(second)) < torch.tensor([[len(first)], [len(second)]])).long()
    vectors, words = states.units(ids, mask)
    assert not vectors.requires_grad and vectors.shape == (2, 3, 12) and words.tolist() == [[1, 1, 1], [1, 1, 1]]
    with h5py.File(weights_file, "r") as h5:
        np.testing.assert_allclose(vectors[0].numpy(), reference_layers(h5, ["keeper", "counted", "gulls"])[2],
                                   atol=1e-5)
        np.testing.assert_allclose(vectors[1].numpy(), reference_layers(h5, ["storm", "came", "zébra" + "x" * 60])[2],
                                   atol=1e-5)  # any word, cut to ELMo's 48 bytes
    fields = [("title", tokenizer.encode("The keeper")), ("abstract", first)]
    assert split_fields(fields, "title", 2, unit_end_id=1) == (fields[0][1], first[:first.index(1, 7) + 1])
    states.train()
    assert not states.bilm.training
    with pytest.raises(ConfigError, match=r"embeddings.init_args.weights_file: no file at .*missing.hdf5"):
        ElmoTokens(str(options_file), str(tmp_path / "missing.hdf5")).build()
    other = json.loads(json.dumps(ELMO_TINY_OPTIONS))
    other["lstm"]["dim"] = 11
    (tmp_path / "other.json").write_text(json.dumps(other))
    with pytest.raises(ConfigError, match=r"other.json' does not match .*elmo_weights.hdf5': dataset char_embed|"
                                          r"other.json' does not match .*elmo_weights.hdf5': dataset RNN_0"):
        ElmoTokens(str(tmp_path / "other.json"), str(weights_file)).build()
    (tmp_path / "broken.hdf5").write_text("not hdf5")
    with pytest.raises(ConfigError, match="broken.hdf5' is not an hdf5 file"):
        ElmoTokens(str(options_file), str(tmp_path / "broken.hdf5")).build()
    with pytest.raises(ConfigError, match="layer_mix: must be 'mean' or 'top'"):
        ElmoTokens(str(options_file), str(weights_file), layer_mix="sum")


def elmo_config(tmp_path, options_file, weights_file, document_vector: str = "coupled") -> str:
    return ctpe_task_config(tmp_path, "elmo", {"class_path": "lit_docemb.methods.ElmoTokens", "init_args": {
        "options_file": str(options_file), "weights_file": str(weights_file)}}, 24, document_vector)


def test_ctpe_elmo_fits_and_evaluates_through_the_cli(tmp_path, capsys):
    options_file, weights_file = write_elmo_release(tmp_path / "elmo")
    cli = main(["fit", "--config", elmo_config(tmp_path, options_file, weights_file)])
    assert cli.trainer.global_step == 2
    assert all(not p.requires_grad for p in cli.model.encoder.token_vectors.parameters())
    trained = [p for p in cli.model.parameters() if p.requires_grad]
    assert trained and all(torch.isfinite(p).all() for p in trained)
    task = tmp_path / "task"
    spec = f"{{class_path: lit_docemb.eval.candidates.CandidateRanking, init_args: {{root: {task}}}}}"
    for document_vector in ("coupled", "average"):  # Table 4's CTPE0 and avg columns
        out = tmp_path / f"out_{document_vector}"
        main(["evaluate", "--config", elmo_config(tmp_path, options_file, weights_file, document_vector),
              "--evaluation", spec, "--output", str(out), "--accelerator", "cpu"])
        flat = json.dumps(json.loads((out / "evaluation.json").read_text()))
        assert "f1@20" in flat and "paper_bpref" in flat, flat[:500]


def test_a_missing_weights_file_stops_the_cli_in_one_line(tmp_path, capsys):
    options_file, _ = write_elmo_release(tmp_path / "elmo")
    with pytest.raises(SystemExit) as stopped:
        main(["fit", "--config", elmo_config(tmp_path, options_file, tmp_path / "absent.hdf5")])
    error = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and "absent.hdf5" in error and "Traceback" not in error
    assert "model.init_args.embeddings.init_args.weights_file: no file at" in error and "allennlp.org/elmo" in error
    assert len(error.splitlines()) == 1, error
