"""``python -m lit_docemb build-wikir``: the command line of the WIKIR builder (the construction itself:
tests/data/test_wikir_builder.py)."""

from __future__ import annotations

import json

import pytest
from corpus_files import write_wikir_dump

from lit_docemb.commands import main

SMALL = ["--min_document_words", "40", "--validation_queries", "2", "--test_queries", "2"]


def test_builds_and_prints_the_record(tmp_path, capsys):
    dump = write_wikir_dump(tmp_path / "dumps" / "enwiki-20201220-pages-articles-multistream.xml")
    record = main(["build-wikir", "--input", str(dump.parent), "--output", str(tmp_path / "wikIR62k"),
                   "--queries", "title", "--bm25_depth", "3", *SMALL])
    out = capsys.readouterr().out
    assert record["queries"] == {"training": 12, "validation": 2, "test": 2}
    assert record["settings"]["queries"] == "title" and record["dumps"] == [str(dump)]
    printed, written = out.split("\nwritten to ")
    assert json.loads(printed) == record and written.startswith(str(tmp_path / "wikIR62k"))
    for split in ("training", "validation", "test"):
        lines = (tmp_path / "wikIR62k" / split / "BM25.res").read_text().splitlines()
        assert lines and all(int(line.split()[3]) <= 3 for line in lines)


@pytest.mark.parametrize(("arguments", "message"), [
    (["--min_document_words", "0"], "error: --min_document_words: must be at least 1, got 0"),
    (["--validation_queries", "20"], "error: --validation_queries/--test_queries: 16 queries qualify"),
])
def test_bad_values_exit_2_with_one_line(tmp_path, capsys, arguments, message):
    dump = write_wikir_dump(tmp_path / "enwiki.xml")
    with pytest.raises(SystemExit) as stop:
        main(["build-wikir", "--input", str(dump), "--output", str(tmp_path / "out"), *SMALL, *arguments])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1
