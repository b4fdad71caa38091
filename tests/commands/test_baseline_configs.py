"""configs/baselines: one file per public checkpoint, named as on the Hugging Face hub, given after a dataset config
(embedding baselines: the model section, under sentence_sum/ when a document is the sum of its sentences' vectors;
fine-tuned baselines under classify/: the classifier's backbone)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lit_docemb.commands import main

ROOT = Path(__file__).resolve().parents[2]
BASELINES = ROOT / "configs" / "baselines"
EMBEDDING = sorted(p for p in BASELINES.rglob("*.yaml")
                   if not {"classify", "classical", "doc2vecc"} & set(p.relative_to(BASELINES).parts))
"""Public checkpoints (classical/ holds the untrained classical baselines: tests/methods/test_classical.py; doc2vecc/
the Doc2VecC trained for CTPE's tables: tests/commands/test_ctpe_doc2vecc.py)."""
CLASSIFY = sorted((BASELINES / "classify").rglob("*.yaml"))


def printed_config(capsys, *configs: Path) -> dict:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", *(arg for config in configs for arg in ("--config", str(config))), "--print_config"])
    assert exit_info.value.code in (0, None)
    return yaml.safe_load(capsys.readouterr().out)


@pytest.mark.parametrize("baseline", EMBEDDING, ids=lambda p: str(p.relative_to(BASELINES)))
def test_an_embedding_baseline_replaces_the_model_of_a_dataset_config(baseline, capsys):
    relative = baseline.relative_to(BASELINES)
    summed = relative.parts[0] == "sentence_sum"  # a document as the sum of its sentences' vectors (DECA's BERT-ST)
    name = str((relative.relative_to("sentence_sum") if summed else relative).with_suffix(""))
    if relative.parts[0] == "packaged":  # an encoder installed as a package (no hub): named as the package
        name = f"package:{relative.stem}"
    config = printed_config(capsys, ROOT / "configs/graph_roberta/cluster_arxiv.yaml", baseline)
    assert config["model"]["class_path"] == "lit_docemb.methods.DocSplit"
    encoder = config["model"]["init_args"]["encoder"]["init_args"]
    assert encoder["name"] == name  # the file is named as the hub names the checkpoint
    assert config["model"]["init_args"]["sentence_pooling"] == ("sum" if summed else "none")
    assert config["data"]["class_path"] == "lit_docemb.data.ArxivDataModule"


@pytest.mark.parametrize("baseline", CLASSIFY, ids=lambda p: str(p.relative_to(BASELINES)))
def test_a_fine_tuned_baseline_replaces_the_backbone_of_a_classification_config(baseline, capsys):
    name = str(baseline.relative_to(BASELINES / "classify").with_suffix(""))
    config = printed_config(capsys, ROOT / "configs/graph_roberta/classify_hyperpartisan.yaml", baseline)
    init_args = config["model"]["init_args"]
    assert init_args["backbone"]["init_args"]["encoder"]["init_args"]["name"] == name
    assert init_args["checkpoint"] is None
    assert init_args["labels"] == ["false", "true"] and init_args["optimizer"]["init_args"]["lr"] == 3.0e-05
    assert config["trainer"]["default_root_dir"] == f"runs/baselines/{{data.init_args.source}}/{name}"


@pytest.mark.parametrize("baseline", CLASSIFY, ids=lambda p: str(p.relative_to(BASELINES)))
def test_after_a_docsplit_config_a_baseline_trains_only_the_last_layer(baseline, capsys):
    """DocSplit Table 1 (Appendix A.1): the baseline's encoder frozen, the head trained with lr 3e-4, batch 8."""
    config = printed_config(capsys, ROOT / "configs/docsplit/classify_bbc.yaml", baseline)
    init_args = config["model"]["init_args"]
    assert init_args["freeze_backbone"] is True and init_args["checkpoint"] is None
    assert init_args["optimizer"]["init_args"]["lr"] == 3.0e-04 and config["data"]["init_args"]["global_batch_size"] == 8
    assert init_args["labels"] == ["business", "entertainment", "politics", "sport", "tech"]
