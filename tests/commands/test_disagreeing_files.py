"""A corpus whose files disagree is one line naming both files, exit status 2, from every command that reads it
(issue 38, item 6): text_gcn's list and corpus of different lengths (a truncated download), a list without the
configured split, a corpus file that is missing. Written in text_gcn's real layout (``data/R8.txt``,
``data/corpus/R8.clean.txt``); read by DECA's R8 config with the TF-IDF baseline (no encoder to load)."""

from __future__ import annotations

from pathlib import Path

import pytest
from journeys import write_text_gcn_release
from test_bad_values import one_error_line

ROOT = Path(__file__).resolve().parents[2]


def spoil(listing: Path, case: str) -> str:
    """Breaks the text_gcn files of ``listing`` as ``case`` says; returns the start of the expected error line."""
    corpus = listing.parent / "corpus" / "R8.clean.txt"
    if case == "truncated":
        corpus.write_text("".join(corpus.read_text().splitlines(True)[:30]))
        return f"{listing} has 32 lines but {corpus} has 30: they must be the list and the corpus file of the same"
    if case == "missing_split":
        listing.write_text(listing.read_text().replace("\ttest\t", "\ttrain\t"))
        return f"{listing} lists no 'test' document (its split fields: train), so {corpus} has none either"
    corpus.unlink()
    (listing.parent / "corpus" / "R8.txt").unlink()
    return f"text_gcn corpus file for '{listing}' not found (looked at {corpus}, {listing.parent / 'R8.clean.txt'})"


@pytest.mark.parametrize("command", ["fit", "evaluate", "validate"])
@pytest.mark.parametrize("case", ["truncated", "missing_split", "missing_corpus"])
def test_text_gcn_files_that_disagree_are_one_line_from_every_command(tmp_path, capsys, command, case):
    listing = write_text_gcn_release(tmp_path / "data", "R8")
    expected = spoil(listing, case)
    argv = [command, "--config", str(ROOT / "configs/deca/r8_dc_sc.yaml"), "--config",
            str(ROOT / "configs/baselines/classical/tfidf.yaml"), f"--data.init_args.source={listing}",
            "--data.init_args.num_workers=0", f"--data.init_args.cache_dir={tmp_path / 'cache'}"]
    argv += (["--output", str(tmp_path / "evaluation"), "--accelerator", "cpu"] if command == "evaluate" else
             [f"--trainer.default_root_dir={tmp_path / 'run'}", "--trainer.accelerator=cpu", "--trainer.logger=false"])
    assert one_error_line(argv, capsys).startswith(expected)
