"""``python -m lit_docemb grid``: a paper table's cells as fits (DECA Table 5's grid file parses cell by cell; a
small grid runs on fixture data and tabulates the metric), and bad grid files are one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from corpus_files import labelled_docs

from lit_docemb.commands.grid import main, read_grid
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
])
def test_bad_grid_files_are_one_line_errors(tmp_path, content, message):
    (tmp_path / "grid.yaml").write_text(content)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_grid(tmp_path / "grid.yaml")
    with pytest.raises(ConfigError, match="grid: no file at"):
        read_grid(tmp_path / "none.yaml")
