"""``evaluate`` picks document matching for CoLDE's matching split (SimilarityGroupDataModule with test_fraction)."""

from __future__ import annotations

import pytest

from lit_docemb.eval.runner import default_evaluations
from lit_docemb.data import AANDataModule, SimilarityGroupDataModule
from lit_docemb.errors import ConfigError
from lit_docemb.eval.matching import DocumentMatching


def test_evaluate_defaults_to_matching_on_the_matching_split(tmp_path):
    corpus = AANDataModule(str(tmp_path), layout="network")
    evaluations = default_evaluations(SimilarityGroupDataModule(corpus, test_fraction=0.1))
    assert [type(e) for e in evaluations] == [DocumentMatching]
    with pytest.raises(ConfigError, match="no query split, no labels, no document pairs"):  # documents only
        default_evaluations(SimilarityGroupDataModule(corpus))
