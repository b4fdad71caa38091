"""benchmarks/reproduce_deca.py's IMDB rows: aclImdb's folders read by lit_docemb's class-folder reader (train, test
and the unlabelled train/unsup reviews the reference trains on), where --imdb points by default, and the reference
program's vectors scored on the labelled rows only (a stand-in program on the fixture's release layout)."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from benchmark_scripts import benchmark_module
from corpus_files import LABELLED_WORDS
from journeys import write_imdb_folders, write_text_gcn_release

#: Stands in for doc2vecc: checks it trains on every line of the corpus it writes vectors for, logs its window, and
#: writes per line (sea words, code words) counts: the fixture's two classes apart.
FAKE_DOC2VECC = '''#!{python}
import sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
ordered = open(args["-test"]).read().splitlines()
assert sorted(open(args["-train"]).read().splitlines()) == sorted(ordered)
print("window", args["-window"], "documents", len(ordered))
sea, code = set({sea!r}.split()), set({code!r}.split())
with open(args["-output"], "w") as out:
    for line in ordered:
        words = line.split()
        out.write(f"{{sum(w in sea for w in words)}} {{sum(w in code for w in words)}}\\n")
'''


def test_the_reference_trains_on_all_of_aclimdb_and_is_scored_on_its_labelled_splits(tmp_path):
    root = write_imdb_folders(tmp_path / "aclImdb", ["neg", "pos"], "unsup")  # 24 train, 8 test, 6 unlabelled
    program = tmp_path / "doc2vecc"
    program.write_text(FAKE_DOC2VECC.format(python=sys.executable, sea=LABELLED_WORDS["sea"],
                                            code=LABELLED_WORDS["code"]))
    program.chmod(0o755)
    with benchmark_module("reproduce_deca") as bench:
        corpus = bench.acl_imdb_corpus(root)
        assert len(corpus.texts) == 38 and corpus.train == list(range(24)) and corpus.test == list(range(24, 32))
        assert {corpus.labels[i] for i in corpus.train + corpus.test} == {"neg", "pos"}
        assert corpus.labels[32:] == [None] * 6  # train/unsup: trained on, never scored
        error, nmi, cpu = bench.reference_row(corpus, bench.SETS["imdb"].window, program, 1, tmp_path / "ref")
    assert error == 0.0 and nmi == 1.0 and cpu > 0
    assert "window 4 documents 38" in (tmp_path / "ref" / "doc2vecc.log").read_text()  # DECA Table 2's IMDB window


def test_imdb_is_read_from_data_root_by_default_and_checked(tmp_path):
    write_imdb_folders(tmp_path / "data" / "aclImdb", ["neg", "pos"], "unsup")
    with benchmark_module("reproduce_deca") as bench:
        parser = bench.build_parser()
        args = parser.parse_args(["--data", str(tmp_path / "data" / "text_gcn"), "--sets", "imdb"])
        assert bench.set_sources(parser, args) == {"imdb": tmp_path / "data" / "aclImdb"}  # <data_root>/aclImdb
        assert parser.parse_args([]).sets == ["r8", "mr", "20news"]  # IMDB only when asked for
        elsewhere = write_imdb_folders(tmp_path / "elsewhere", ["neg", "pos"], "unsup")
        args = parser.parse_args(["--imdb", str(elsewhere), "--sets", "imdb"])
        assert bench.set_sources(parser, args) == {"imdb": elsewhere}
        shutil.rmtree(elsewhere / "train" / "unsup")  # the 50,000 reviews fit_on: all trains on
        with pytest.raises(SystemExit):
            bench.set_sources(parser, parser.parse_args(["--imdb", str(elsewhere), "--sets", "imdb"]))


def test_a_text_gcn_sets_reference_corpus_is_its_corpus_file_in_list_order(tmp_path):
    source = write_text_gcn_release(tmp_path / "text_gcn", "R8")  # 24 training then 8 test documents
    with benchmark_module("reproduce_deca") as bench:
        corpus = bench.text_gcn_corpus(bench.SETS["r8"], source.parent)
    assert corpus.train == list(range(24)) and corpus.test == list(range(24, 32))
    assert corpus.texts == (source.parent / "corpus" / "R8.clean.txt").read_text().splitlines()
    assert corpus.labels == [line.split("\t")[2] for line in source.read_text().splitlines()]


@pytest.fixture
def bench():
    with benchmark_module("reproduce_deca") as module:
        yield module


def test_each_reading_names_its_backbone_with_the_sets_window_and_sample(bench):
    imdb = bench.reading_arguments("adam", bench.SETS["imdb"], 0.1, "DC+SC")
    assert imdb == ["--model.init_args.backbone=lit_docemb.methods.deca_components.Doc2VecCAdamBackbone",
                    "--model.init_args.backbone.init_args.window_size=4",
                    "--model.init_args.backbone.init_args.sample_words=15",
                    "--model.init_args.framework.init_args.weight=0.1"]
    assert bench.reading_arguments("adam", bench.SETS["r8"], 0.1, "Doc2VecC")[-1].endswith("sample_words=5")
    assert bench.reading_arguments("chen", bench.SETS["r8"], None, "DC+SC") == [  # its own rate and lambda
        "--model.init_args.optimizer.init_args.lr=0.001",
        "--model.init_args.backbone=lit_docemb.methods.deca_components.Doc2VecCBackbone",
        "--model.init_args.backbone.init_args.window_size=6", "--model.init_args.framework.init_args.weight=1.0"]
    assert "--model.init_args.framework.init_args.weight=0.3" in bench.reading_arguments("chen", bench.SETS["r8"], 0.3,
                                                                                        "DC+SC")
    assert bench.reading_arguments("adam", bench.SETS["r8"], None, "Doc2VecC", lr=3e-3)[0] == \
        "--model.init_args.optimizer.init_args.lr=0.003"


def test_table_5_fits_under_the_reading_asked_for(bench, tmp_path, monkeypatch):
    """--table5 under --reading adam fits its cells with Algorithm 1's backbone; lambda goes to DECA's row only (the
    appended rows have no contrastive term)."""
    source = write_text_gcn_release(tmp_path / "text_gcn", "R8")
    fitted, warmed = [], []
    monkeypatch.setattr(bench, "fit_row", lambda src, config, extra, seed, folder: fitted.append(extra) or
                        (3.0, 0.5, 1.0))
    monkeypatch.setattr(bench, "warm_up", lambda src, config, extra, folder: warmed.append(extra))
    bench.main(["--data", str(source.parent), "--sets", "r8", "--rows", "Doc2VecC", "--table5", "--reading", "adam",
                "--weight", "0.1", "--lr", "3e-3", "--seeds", "1", "--out", str(tmp_path / "out")])
    assert warmed == fitted[:1]  # the Doc2VecC row's kernels compiled once, untimed, before its timed fits
    cells = fitted[1:]  # after the Doc2VecC row: DECA's 3 columns, -Contrastive's 3, -Dictionary's 2
    assert len(cells) == 8
    assert all("--model.init_args.backbone=lit_docemb.methods.deca_components.Doc2VecCAdamBackbone" in extra and
               "--model.init_args.optimizer.init_args.lr=0.003" in extra for extra in cells)
    weighted = ["--model.init_args.framework.init_args.weight=0.1" in extra for extra in cells]
    assert weighted == [True] * 3 + [False] * 5


def test_issue_37_targets_judge_order_margin_nmi_and_the_reference(bench):
    runs = {"DC+SC": [(2.6, 0.62, 1.0), (2.8, 0.64, 1.0)], "DC+SS": [(2.9, 0.6, 1.0)],
            "Doc2VecC": [(3.1, 0.60, 1.0)], "reference": [(3.0, 0.61, 1.0)]}
    lines = bench.contribution_targets({"sets": {"r8": runs}})
    assert lines == ["PASS r8 order DC+SC 2.70 < DC+SS 2.90 < Doc2VecC 3.10",
                     "PASS r8 DC+SC margin over Doc2VecC +0.40 points (>= 0.3, half the paper's)",
                     "PASS r8 DC+SC NMI 0.630 above Doc2VecC's 0.600",
                     "PASS r8 Doc2VecC error 3.10 within 0.5 of the reference's 3.00",
                     "PASS r8 Doc2VecC CPU 1.00 x the reference's (<= 1.0)",
                     "PASS r8 DC+SC CPU 1.00 x the reference's (<= 1.5)"]
    runs["DC+SS"] = [(3.3, 0.6, 1.0)]
    runs["reference"] = [(2.5, 0.61, 0.8)]
    runs["DC+SC"] = [(2.6, 0.62, 1.0), (2.8, 0.64, 1.8)]
    failed = [line for line in bench.contribution_targets({"sets": {"r8": runs}}) if line.startswith("FAIL")]
    assert failed == ["FAIL r8 order DC+SC 2.70 < DC+SS 3.30 < Doc2VecC 3.10",
                      "FAIL r8 Doc2VecC error 3.10 within 0.5 of the reference's 2.50",
                      "FAIL r8 Doc2VecC CPU 1.25 x the reference's (<= 1.0)",
                      "FAIL r8 DC+SC CPU 1.75 x the reference's (<= 1.5)"]


@pytest.mark.parametrize("readings", [(("chen", None), ("adam", None)), (("adam", None), ("adam", 3e-3))])
def test_a_report_refuses_results_of_two_readings(bench, tmp_path, readings):
    files = []
    for i, (reading, lr) in enumerate(readings):
        files.append(tmp_path / f"{i}.json")
        files[-1].write_text(json.dumps({"started": "-", "load_before": [0], "reading": reading, "weight": None,
                                         "lr": lr, "sets": {"r8": {"Doc2VecC": [[3.0, 0.6, 1.0]]}}}))
    with pytest.raises(bench.ReportError, match="different readings"):
        bench.report(files)


@pytest.mark.parametrize("content, says", [(None, "cannot be read"), ("{", "not JSON"), ("[1]", "no 'sets' table")])
def test_a_report_of_a_bad_file_is_one_line_naming_it(bench, tmp_path, capsys, content, says):
    file = tmp_path / "results.json"
    if content is not None:
        file.write_text(content)
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--report", str(file)])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f": error: --report: {file}: {says}" in error


def test_paired_margins_pair_the_rows_of_one_file_seed_by_seed(bench, capsys):
    one = {"sets": {"20news": {"DC+SC": [[15.2, 0.66, 1.0]], "Doc2VecC": [[15.6, 0.67, 1.0]]},
                    "r8": {"DC+SC": [[2.9, 0.64, 1.0], [3.2, 0.62, 1.0]], "Doc2VecC": [[3.0, 0.6, 1.0]]}}}
    two = {"sets": {"20news": {"DC+SC": [[15.0, 0.70, 1.0]], "Doc2VecC": [[16.0, 0.65, 1.0]]},
                    "mr": {"DC+SS": [[32.0, 0.1, 1.0]], "Doc2VecC": [[31.0, 0.1, 1.0]]}}}
    pairs = bench.paired_margins([one, two])
    assert list(pairs) == ["20news"]  # R8's rows ran different seeds, MR has no DC+SC
    assert [value for pair in pairs["20news"] for value in pair] == pytest.approx([0.4, -0.01, 1.0, 0.05])
    bench.print_paired_margins(pairs)
    row = capsys.readouterr().out.strip().splitlines()[-1]
    # mean 0.7, sd 0.424, t(0.975, 1) = 12.706: half-width 3.81
    assert row == "| 20news | +0.40, +1.00 | +0.70 | -3.11 to +4.51 | 2.1 | -0.010, +0.050 |"
