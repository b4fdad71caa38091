"""CTPE's released subsets (opendata-ai/tr layout: a ground-truth dict line, then id<TAB>title<TAB>abstract) converted
to the candidates/test/qrels task folder, read back by the candidate ranking, and through the command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lit_docemb.data.corpora.ctpe_release import convert_ctpe_release, read_ctpe_release
from lit_docemb.eval.candidates import read_candidate_task

RELEASE = ("{'q1': {'c1', 'c2'}, 'q2': {'c3'}}\n"
           "c1\tgraph neural networks\twe study message passing on graphs\n"
           "q1\tgraph learning survey\ta survey of learning on graphs\n"
           "c2\tgraph kernels\tkernels for graph comparison\n"
           "c3\tprotein folding\tpredicting structures of proteins\n"
           "q2\tprotein design\tdesigning proteins with models\n"
           "c4\tsorting networks\toptimal comparator networks\n")


def test_release_becomes_a_task_folder_that_the_ranking_reads(tmp_path):
    (tmp_path / "arxiv.txt").write_text(RELEASE)
    counts = convert_ctpe_release(tmp_path / "arxiv.txt", tmp_path / "task")
    assert counts == {"candidates": 4, "test": 2, "qrels": 3}
    task = read_candidate_task(tmp_path / "task")
    assert [d.id for d in task.candidates] == ["c1", "c2", "c3", "c4"] and [d.id for d in task.queries] == ["q1", "q2"]
    assert task.qrels == {"q1": {"c1": 1, "c2": 1}, "q2": {"c3": 1}}
    first = task.queries[0]
    assert first.title == "graph learning survey" and [(s.heading, s.text) for s in first.sections] == [
        ("Abstract", "a survey of learning on graphs")]


def test_uspto_claims_become_a_second_section_and_bad_files_name_the_line(tmp_path):
    (tmp_path / "uspto.txt").write_text("{'p1': ['p2']}\np1\ta lamp\tan abstract\tclaim one\np2\ta bulb\tbulbs\tclaim\n")
    candidates, tests, _ = read_ctpe_release(tmp_path / "uspto.txt")
    assert [s.heading for s in tests[0].sections] == ["Abstract", "Claims"]
    (tmp_path / "bad.txt").write_text("__import__('os')\n")
    with pytest.raises(ValueError, match=r"bad.txt:1: the first line must be the ground truth"):
        read_ctpe_release(tmp_path / "bad.txt")
    (tmp_path / "missing.txt").write_text("{'q': {'gone'}}\nq\tt\ta\n")
    with pytest.raises(ValueError, match=r"1 ground-truth ids have no document line, e.g. \['gone'\]"):
        read_ctpe_release(tmp_path / "missing.txt")
    (tmp_path / "short.txt").write_text("{'q': {'c'}}\nq\tonly a title\n")
    with pytest.raises(ValueError, match=r"short.txt:2: 2 tab-separated fields"):
        read_ctpe_release(tmp_path / "short.txt")


def test_command_converts_and_refuses_a_missing_file_in_one_line(tmp_path):
    (tmp_path / "dblp.txt").write_text(RELEASE)
    done = subprocess.run([sys.executable, "-m", "lit_docemb", "ctpe-release", "--input",
                           str(tmp_path / "dblp.txt"), "--output", str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.split("ctpe-release ", 1)[1]) == {"candidates": 4, "test": 2, "qrels": 3}
    missing = subprocess.run([sys.executable, "-m", "lit_docemb", "ctpe-release", "--input",
                              str(tmp_path / "nope.txt"), "--output", str(tmp_path / "out2")], capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0 and "opendata-ai/tr" in missing.stderr
