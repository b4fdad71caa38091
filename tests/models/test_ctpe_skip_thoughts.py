"""CTPE's Skip-thoughts row: the plain-torch Skip-thoughts encoder (lit_docemb/models/skip_thoughts.py) read from a tiny
release in the authors' file layout (npz + pkl + npy + dictionary.txt), checked against a step-by-step numpy GRU;
sentence units in CTPE; fit / CTPE0 / avg through the real CLI; bad files stop in one line naming the file."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch
from corpus_files import write_skip_thoughts_release
from journeys import ctpe_task_config
from skip_thoughts_reference import reference_vector

from lit_docemb.commands import main
from lit_docemb.errors import ConfigError
from lit_docemb.models.ctpe import SkipThoughtSentences
from lit_docemb.models.ctpe_tokenizers import SentenceWordIds, preprocess_sentences
from lit_docemb.views.ctpe import split_fields

WORDS = ["the", "keeper", "counted", "gulls", "storm", "came", "late"]  # "left" is not in the dictionary
TEXTS = ["The keeper counted gulls.\nThe storm came late! The gulls left.", "Storm gulls came"]


def test_sentence_vectors_match_the_step_by_step_reference(tmp_path):
    folder = write_skip_thoughts_release(tmp_path / "skip", WORDS)
    assert pickle.loads((folder / "uni_skip.npz.pkl").read_bytes())["dim"] == 6
    assert preprocess_sentences(TEXTS[0]) == ["the keeper counted gulls", "the storm came late", "the gulls left"]
    tokenizer, states = SkipThoughtSentences(str(folder)).build()
    assert isinstance(tokenizer, SentenceWordIds) and states.dim == 6 + 2 * 4
    first = tokenizer.encode(TEXTS[0])
    assert first.count(1) == 3 and first[-1] == 1 and first[:4] == [2, 3, 4, 5]  # dictionary rows + 2, then the end
    assert tokenizer.encode("left")[0] == tokenizer.unknown_id == 2 + len(WORDS)  # "left": UNK's row
    second = tokenizer.encode("Storm gulls came. Zebras sing")[:-1]  # the last sentence without its end id
    ids = torch.tensor([first, second + [0] * (len(first) - len(second))])
    mask = (torch.arange(len(first)) < torch.tensor([[len(first)], [len(second)]])).long()
    vectors, units = states.units(ids, mask)
    assert vectors.shape == (2, 3, 14) and not vectors.requires_grad and units.tolist() == [[1, 1, 1], [1, 1, 0]]
    for row, col, sentence in ((0, 0, "the keeper counted gulls"), (0, 1, "the storm came late"),
                               (0, 2, "the gulls left"), (1, 0, "storm gulls came"), (1, 1, "zebras sing")):
        np.testing.assert_allclose(vectors[row, col].numpy(), reference_vector(folder, sentence), atol=1e-5,
                                   err_msg=sentence)
    assert vectors[1, 2].abs().max() == 0  # padding
    states.train()
    assert not states.encoder.training
    fields = [("title", tokenizer.encode("The storm")), ("abstract", first)]
    former, latter = split_fields(fields, "title", 2, unit_end_id=1)
    assert former == fields[0][1] and latter == first[:first.index(1, 5) + 1]  # l = 2 sentences of the abstract


def test_bad_release_files_stop_in_one_line(tmp_path):
    folder = write_skip_thoughts_release(tmp_path / "skip", WORDS)
    (folder / "btable.npy").unlink()
    with pytest.raises(ConfigError, match=r"embeddings.init_args.folder: .* lacks btable.npy"):
        SkipThoughtSentences(str(folder)).build()
    other = write_skip_thoughts_release(tmp_path / "other", WORDS, uni_dim=7)
    (folder / "uni_skip.npz.pkl").write_bytes((other / "uni_skip.npz.pkl").read_bytes())
    np.save(folder / "btable.npy", np.load(other / "btable.npy", allow_pickle=True), allow_pickle=True)
    with pytest.raises(ConfigError, match=r"uni_skip.npz' does not match its .pkl options: encoder_W"):
        SkipThoughtSentences(str(folder)).build()
    (folder / "uni_skip.npz.pkl").write_bytes(pickle.dumps({"dim_word": 5, "dim": 6, "hook": pytest.raises}))
    with pytest.raises(ConfigError, match=r"uni_skip.npz.pkl' cannot be read as Skip-thoughts' release \(refused"):
        SkipThoughtSentences(str(folder)).build()


def skip_config(tmp_path, folder, document_vector: str = "coupled") -> str:
    return ctpe_task_config(tmp_path, "skip", {"class_path": "lit_docemb.methods.SkipThoughtSentences",
                                              "init_args": {"folder": str(folder)}}, 20, document_vector)


def test_ctpe_skip_thoughts_fits_and_evaluates_through_the_cli(tmp_path):
    folder = write_skip_thoughts_release(tmp_path / "skip", ["the", "of", "a", "is", "to", "and"])
    cli = main(["fit", "--config", skip_config(tmp_path, folder)])
    assert cli.trainer.global_step == 2
    assert isinstance(cli.model.tokenizer, SentenceWordIds) and cli.model.encoder.former.convs[0].in_channels == 14
    task = tmp_path / "task"
    spec = f"{{class_path: lit_docemb.eval.candidates.CandidateRanking, init_args: {{root: {task}}}}}"
    for document_vector in ("coupled", "average"):  # Table 4's CTPE0 and avg-Skip-thoughts columns
        out = tmp_path / f"out_{document_vector}"
        main(["evaluate", "--config", skip_config(tmp_path, folder, document_vector), "--evaluation", spec,
              "--output", str(out), "--accelerator", "cpu"])
        flat = json.dumps(json.loads((out / "evaluation.json").read_text()))
        assert "f1@20" in flat and "paper_bpref" in flat, flat[:500]


def test_a_missing_release_folder_stops_the_cli_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["fit", "--config", skip_config(tmp_path, tmp_path / "absent")])
    error = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and "Traceback" not in error and len(error.splitlines()) == 1, error
    assert "model.init_args.embeddings.init_args.folder:" in error and "absent' lacks uni_skip.npz" in error
