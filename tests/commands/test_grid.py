"""``python -m lit_docemb grid``: a paper table's cells as fits (DECA Table 5's grid file parses cell by cell; a
small grid runs on fixture data and tabulates the metric), and bad grid files are one-line errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from corpus_files import FAKENEWS_HEADER, labelled_docs

from lit_docemb.commands.grid import main, read_grid, select, summary
from lit_docemb.commands.slurm import resolve_fit_config
from lit_docemb.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
WORDNET = Path("/usr/share/wordnet")


def test_deca_table5_grid_cells_are_valid_fit_configs(monkeypatch):
    monkeypatch.chdir(ROOT)
    grid = read_grid(ROOT / "grids/deca_table5.yaml")
    assert list(grid["rows"]) == ["DECA", "-Contrastive", "-Dictionary"]
    assert list(grid["columns"]) == ["WordNet", "PPDB", "Antonyms", "Uninformative", "Back Trans."]
    expected = {"WordNet": "WordNet", "PPDB": "PPDB", "Antonyms": "Antonym", "Uninformative": "Uninformative",
                "Back Trans.": "BackTranslation"}
    for row, row_args in grid["rows"].items():
        for column, column_args in grid["columns"].items():
            if (row, column) in grid["skip"]:
                continue
            printed = resolve_fit_config([*row_args, *column_args])["model"]["init_args"]
            assert printed["augmentation"]["class_path"].endswith("." + expected[column]), (row, column)
            assert printed["framework"]["class_path"].endswith("SimCLR" if row == "DECA" else "Append")
            constraint = printed["augmentation"]["init_args"].get("dictionary_constraint", True)
            assert constraint == (row != "-Dictionary"), (row, column)


FAKENEWS_TYPES = ["bias", "clickbait", "conspiracy", "fake", "hate", "junksci", "political", "reliable", "satire",
                  "state", "unreliable"]


PRETRAINED = {"DocSplit_bert": "runs/docsplit_bert_wikipedia/checkpoints/last.ckpt",
              "DocSplit_long": "runs/docsplit_longformer_wikipedia/checkpoints/last.ckpt",
              "SimCSE_long": "runs/simcse_long_wikipedia/checkpoints/last.ckpt"}
"""Table 2's models pretrained here: the run whose checkpoint each grid column starts from."""


def test_docsplit_table2_grid_cells_are_table_1s_classifiers_on_k_per_class(monkeypatch):
    """Appendix A.1: 10 per class for FakeNews and arXiv, 5 for the others, "other settings the same as the standard
    text classification" (the frozen encoder, lr 3e-4, batch 8, 512 tokens, Table 1's classes); seeds 0-9."""
    monkeypatch.chdir(ROOT)
    grid = read_grid(ROOT / "grids/docsplit_table2_few_shot.yaml")
    assert grid["test"] and grid["metric"] == ["test/accuracy", "test/macro_f1"]
    assert [args for args in grid["repeats"].values()] == [[f"--data.init_args.few_shot_seed={s}"] for s in range(10)]
    shots = {"FakeNews": 10, "20News": 5, "arXiv": 10, "NYT": 5, "BBCNews": 5}
    assert list(grid["rows"]) == list(shots)
    checked = 0
    for row, row_args in grid["rows"].items():
        for column, column_args in grid["columns"].items():
            if (row, column) in grid["skip"]:
                continue
            printed = resolve_fit_config([*row_args, *column_args, *grid["repeats"]["seed 3"]])
            data, model, trainer = printed["data"]["init_args"], printed["model"]["init_args"], printed["trainer"]
            assert (data["few_shot_per_class"], data["few_shot_seed"]) == (shots[row], 3), (row, column)
            assert data["global_batch_size"] == 8 and model["optimizer"]["init_args"]["lr"] == 3e-4
            encoder = model["backbone"]["init_args"]["encoder"]
            encoder = encoder.get("init_args", encoder)
            assert model["freeze_backbone"] and encoder["max_length"] == 512, (row, column)
            assert trainer["limit_val_batches"] == 0 and not trainer["enable_checkpointing"]
            assert not trainer["callbacks"] and trainer["max_epochs"] == 100 and trainer["devices"] == 1
            backbone = model["backbone"]["class_path"].rsplit(".", 1)[-1]
            assert (backbone == "SimCSE") == (column == "SimCSE_long"), (row, column)
            assert model["checkpoint"] == PRETRAINED.get(column), (row, column)  # ours, or the hub's (null)
            if row == "FakeNews":  # Table 1's 11 documented types, for the data and the head alike
                assert data["classes"] == model["labels"] == FAKENEWS_TYPES, column
            instruction = encoder.get("instruction") or ""
            domain = "science paper" if row == "arXiv" else "news article"
            assert instruction.startswith(f"Represent the {domain}") == column.startswith("INSTRUCTOR"), (row, column)
            checked += 1
    assert checked == 5 * 11 - 6  # INSTRUCTOR: no 20News cell, and one instruction per domain


def test_a_few_shot_grid_trains_each_seed_on_k_per_class_and_gives_mean_and_sd(tiny_encoder_dir, tmp_path, capsys):
    """The Table 2 protocol at fixture size through the CLI: FakeNews's config (its 11 types kept), k = 3 per class
    drawn by each seed, fitted and tested; the cell is the mean and sample sd of the seeds' test metrics."""
    source = write_fakenews_types(tmp_path / "fakenews" / "news_cleaned_2018_02_13.csv", [*FAKENEWS_TYPES, "stray"])
    grid = {"metric": ["test/accuracy", "test/macro_f1"], "test": True,
            "rows": {"FakeNews": ["--config", str(ROOT / "configs/docsplit/classify_fakenews.yaml"),
                                  "--config", str(ROOT / "configs/trainer/few_shot.yaml"),
                                  "--data.init_args.few_shot_per_class=3"]},
            "columns": {"tiny": [f"--model.init_args.backbone.init_args.encoder.name={tiny_encoder_dir}",
                                 "--model.init_args.backbone.init_args.encoder.max_length=32",
                                 "--model.init_args.checkpoint=null"]},
            "repeats": {f"seed {s}": [f"--data.init_args.few_shot_seed={s}"] for s in range(3)}}
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(grid))
    extra = [f"--data.init_args.source={source}", f"--data.init_args.cache_dir={tmp_path / 'cache'}",
             "--data.init_args.val_fraction=0.2", "--data.init_args.test_fraction=0.2",
             "--data.init_args.num_workers=0", "--trainer.accelerator=cpu", "--trainer.devices=1",
             "--trainer.precision=32-true", "--trainer.logger=false", "--trainer.max_epochs=2",
             "--trainer.enable_progress_bar=false"]
    table = main(["--input", str(tmp_path / "grid.yaml"), "--output", str(tmp_path / "runs"), "--", *extra])
    cell = table["FakeNews"]["tiny"]
    for metric in ("test/accuracy", "test/macro_f1"):
        values = cell[metric]["values"]
        assert list(values) == ["seed 0", "seed 1", "seed 2"] and all(0.0 <= v <= 1.0 for v in values.values())
        assert cell[metric] == summary(values)
        assert cell[metric]["sd"] == pytest.approx(float(np.std(list(values.values()), ddof=1)))
    for seed in range(3):
        stats = json.loads((tmp_path / "runs" / "FakeNews" / "tiny" / f"seed_{seed}" / "data_stats.json").read_text())
        assert stats[f"few-shot draw (seed {seed})"] == {"documents_read": 44, "train": 33, "skipped": {}}
        assert stats["documents"]["skipped"]["other_class"] == 6  # the stray type, as in Table 1
    assert json.loads((tmp_path / "runs" / "grid.json").read_text()) == table
    assert "### test/accuracy (mean ± sd)" in capsys.readouterr().out


def test_fit_with_too_few_documents_of_a_class_stops_in_one_line_with_status_2(tiny_encoder_dir, tmp_path, capsys):
    from lit_docemb.commands import main as cli_main

    source = write_fakenews_types(tmp_path / "fakenews" / "news_cleaned_2018_02_13.csv", FAKENEWS_TYPES)
    with pytest.raises(SystemExit) as stopped:
        cli_main(["fit", "--config", str(ROOT / "configs/docsplit/classify_fakenews.yaml"),
                  "--config", str(ROOT / "configs/trainer/few_shot.yaml"), "--data.init_args.few_shot_per_class=5",
                  f"--data.init_args.source={source}", f"--data.init_args.cache_dir={tmp_path / 'cache'}",
                  "--data.init_args.val_fraction=0.2", "--data.init_args.test_fraction=0.2",
                  "--data.init_args.num_workers=0", f"--model.init_args.backbone.init_args.encoder.name={tiny_encoder_dir}",
                  "--model.init_args.backbone.init_args.encoder.max_length=32",
                  "--model.init_args.checkpoint=null", "--trainer.accelerator=cpu", "--trainer.logger=false",
                  f"--trainer.default_root_dir={tmp_path / 'run'}"])
    assert stopped.value.code == 2
    error = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert error == [f"error: data.init_args.few_shot_per_class 5: the training split has fewer than 5 documents of "
                     f"11 class(es) ({', '.join(f'{t}: 4' for t in FAKENEWS_TYPES[:5])}): lower few_shot_per_class, or "
                     f"keep the classes that have them with data.init_args.classes"]


def write_fakenews_types(path: Path, types: list[str], per_type: int = 6) -> Path:
    """A FakeNews release file (its header and columns) with ``per_type`` invented articles of each type."""
    rows = []
    for t, kind in enumerate(types):
        for i in range(per_type):
            doc = labelled_docs(per_type * len(types))[t * per_type + i]
            rows.append([len(rows), 5000 + len(rows), "example.com", kind, f"http://example.com/{len(rows)}",
                         f"{kind} news. {doc.text}", "2018-01-25", "2018-02-02", "2018-02-02", kind.title(),
                         "", "", "['']", "", "", "", ""])
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    path.parent.mkdir(parents=True)
    path.write_text(FAKENEWS_HEADER + "\n" + buffer.getvalue(), encoding="utf-8")
    return path


def test_rows_and_columns_select_part_of_a_grid():
    grid = read_grid(ROOT / "grids/docsplit_table2_few_shot.yaml")
    part = select(grid, ["arXiv", "NYT"], ["INSTRUCTOR (arXiv)"])
    assert list(part["rows"]) == ["arXiv", "NYT"] and list(part["columns"]) == ["INSTRUCTOR (arXiv)"]
    assert select(grid, None, None) == grid
    with pytest.raises(ConfigError, match=r"--columns: 'SimCSE_short' is not one of the grid's columns"):
        select(grid, None, ["SimCSE_short"])


def test_summary_is_the_mean_and_the_sample_sd():
    cell = summary({"a": 0.5, "b": 0.7, "c": 0.9})
    assert cell["mean"] == pytest.approx(0.7) and cell["sd"] == pytest.approx(0.2)
    assert cell["values"] == {"a": 0.5, "b": 0.7, "c": 0.9}
    assert summary({"a": 0.5})["sd"] is None


@pytest.mark.skipif(not (WORDNET / "data.noun").is_file(), reason="WordNet missing: apt-get install -y wordnet-base")
def test_a_small_grid_fits_every_cell_and_prints_the_table(tmp_path, capsys):
    folder = tmp_path / "set"
    folder.mkdir()
    for split, docs in [("train", labelled_docs(40)), ("test", labelled_docs(12))]:
        (folder / f"{split}.tsv").write_text("".join(f"{d.label}\t{d.text}\n" for d in docs))
    grid = {"metric": "probe/error_rate",
            "rows": {"DECA": ["--config", str(ROOT / "configs/deca/r8_dc_sc.yaml")],
                     "-Contrastive": ["--config", str(ROOT / "configs/deca/r8_dc_append_wordnet.yaml")]},
            "columns": {"WordNet": ["--model.init_args.augmentation=lit_docemb.augment.specs.WordNet"],
                        "Antonyms": ["--model.init_args.augmentation=lit_docemb.augment.specs.Antonym"]},
            "skip": [["-Contrastive", "Antonyms"]]}
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(grid))
    extra = [f"--data.source={folder}", "--data.source_format=auto", "--data.column_names=[label,text]",
             "--data.global_batch_size=8", "--data.num_workers=0", "--trainer.accelerator=cpu", "--trainer.devices=1",
             "--trainer.logger=false", "--trainer.fast_dev_run=2",
             "--model.init_args.backbone.init_args.min_word_count=1",
             "--model.init_args.augmentation.init_args.replacement_min_count=1"]
    table = main(["--input", str(tmp_path / "grid.yaml"), "--output", str(tmp_path / "runs"), "--", *extra])
    assert table["-Contrastive"]["Antonyms"] is None
    assert all(0.0 <= table[r][c] <= 1.0 for r, c in [("DECA", "WordNet"), ("DECA", "Antonyms"),
                                                      ("-Contrastive", "WordNet")])
    assert (tmp_path / "runs" / "DECA" / "Antonyms").is_dir() and (tmp_path / "runs" / "grid.json").is_file()
    assert "grid {" in capsys.readouterr().out


@pytest.mark.parametrize("content, message", [
    ("rows: {a: [x]}\ncolumns: {b: [y]}\n", "metric: give the metric"),
    ("metric: m\nrows: {a: x}\ncolumns: {b: [y]}\n", "rows: a map of name -> list"),
    ("metric: m\nrows: {a: [x]}\ncolumns: {b: [y]}\nskip: [[a, c]]\n", "skip: ['a', 'c'] is not"),
    ("metric: m\nrows: {a: [x]}\ncolumns: {b: [y]}\ncells: 1\n", "unknown keys ['cells']"),
    ("metric: [m, 1]\nrows: {a: [x]}\ncolumns: {b: [y]}\n", "metric: give the metric"),
    ("metric: m\nrows: {a: [x]}\ncolumns: {b: [y]}\ntest: yes please\n", "test: true .* or false"),
    ("metric: m\nrows: {a: [x]}\ncolumns: {b: [y]}\nrepeats: [x]\n", "repeats: a map of name -> list"),
])
def test_bad_grid_files_are_one_line_errors(tmp_path, content, message):
    (tmp_path / "grid.yaml").write_text(content)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_grid(tmp_path / "grid.yaml")
    with pytest.raises(ConfigError, match="grid: no file at"):
        read_grid(tmp_path / "none.yaml")
