"""What a command prints besides its own results: third-party messages filtered in one place
(lit_docemb/commands/console.py), one line for an MLM head built fresh, and a progress-bar rate that is true."""

from __future__ import annotations

import logging
import re
import warnings

import pytest
from jsonargparse import Namespace
from lightning.pytorch.callbacks import DeviceStatsMonitor, LearningRateMonitor, ModelCheckpoint, RichProgressBar
from lightning.pytorch.loggers import WandbLogger
from transformers import AutoTokenizer

from lit_docemb.commands.cli import drop_monitors_without_logger, use_rate_progress_bar
from lit_docemb.commands.console import DropMessages, quiet_third_parties, tidy_loggers
from lit_docemb.methods.progress import RateProgressBar, rate_text
from lit_docemb.models.encoder import HFEncoder

LEAF_SPEC = ("`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec) and "
             "treespec.is_leaf()` instead.")
SRUN = "The `srun` command is available on your system but is not used. HINT: ..."
TIP = "💡 Tip: For seamless cloud logging and experiment tracking, try installing [litlogger](...)"


@pytest.fixture
def lightning_log():
    """Lightning's rank-zero logger without the filter that an earlier command run in this process added, its
    filters restored after the test."""
    log = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    filters = list(log.filters)
    log.filters[:] = [f for f in filters if not isinstance(f, DropMessages)]
    yield log
    log.filters[:] = filters


def test_known_third_party_messages_are_filtered_and_others_kept(lightning_log, caplog):
    environ: dict[str, str] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert quiet_third_parties(environ) is True
        warnings.warn(LEAF_SPEC, FutureWarning)
        warnings.warn(SRUN, UserWarning)
        warnings.warn("a warning of our own", UserWarning)
        warnings.warn("another deprecation", FutureWarning)
    assert [str(w.message) for w in caught] == ["a warning of our own", "another deprecation"]
    with caplog.at_level(logging.INFO, logger=lightning_log.name):
        lightning_log.info(TIP)
        lightning_log.info("GPU available: False, used: False")
    assert [r.getMessage() for r in caplog.records] == ["GPU available: False, used: False"]
    assert environ == {"WANDB_QUIET": "true"}
    quiet_third_parties(environ)  # a second call adds no second filter
    assert sum(isinstance(f, DropMessages) for f in lightning_log.filters) == 1
    kept = {"WANDB_QUIET": "false"}
    quiet_third_parties(kept)
    assert kept == {"WANDB_QUIET": "false"}  # a user's own setting is kept


def test_lit_docemb_verbose_shows_everything(lightning_log, caplog):
    environ = {"LIT_DOCEMB_VERBOSE": "1"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert quiet_third_parties(environ) is False
        warnings.warn(LEAF_SPEC, FutureWarning)
    assert len(caught) == 1
    with caplog.at_level(logging.INFO, logger=lightning_log.name):
        lightning_log.info(TIP)
    assert [r.getMessage() for r in caplog.records] == [TIP]
    assert environ == {"LIT_DOCEMB_VERBOSE": "1"}


def test_our_own_warnings_print_as_one_line_and_others_as_python_prints_them(monkeypatch):
    import lit_docemb.methods.base as ours

    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)  # restored after the test
    quiet_third_parties({})
    wrapped = warnings.formatwarning
    quiet_third_parties({})
    assert warnings.formatwarning is wrapped  # wrapped once, not twice
    assert warnings.formatwarning("the backbone will not train", UserWarning, ours.__file__, 347,
                                  "rank_zero_warn(...)") == "UserWarning: the backbone will not train\n"
    theirs = warnings.formatwarning("deprecated", FutureWarning, logging.__file__, 10, "warn(...)")
    assert theirs.startswith(f"{logging.__file__}:10: FutureWarning: deprecated") and "warn(...)" in theirs


def test_wandb_logger_no_longer_passes_the_unset_anonymous_setting(tmp_path):
    logger = WandbLogger(save_dir=str(tmp_path), offline=True)
    assert "anonymous" in logger._wandb_init and logger._wandb_init["anonymous"] is None
    tidy_loggers([logger], {"LIT_DOCEMB_VERBOSE": "1"})
    assert "anonymous" in logger._wandb_init
    tidy_loggers([logger], {})
    assert "anonymous" not in logger._wandb_init
    chosen = WandbLogger(save_dir=str(tmp_path), offline=True, anonymous=True)
    tidy_loggers([chosen], {})
    assert chosen._wandb_init["anonymous"] == "allow"  # a value the user set is kept


def test_a_fresh_mlm_head_is_one_line_not_a_corruption_warning(headless_encoder_dir, tiny_encoder_dir, caplog,
                                                               capfd, monkeypatch):
    monkeypatch.delenv("LIT_DOCEMB_VERBOSE", raising=False)
    with caplog.at_level(logging.WARNING, logger="lit_docemb.models.encoder"):
        encoder = HFEncoder(headless_encoder_dir, with_mlm_head=True)
    [line] = [r.getMessage() for r in caplog.records]
    fresh = [k for k in encoder.model.state_dict() if k.startswith("cls.") and k != "cls.predictions.decoder.weight"]
    assert line == f"MLM head initialised fresh: {len(fresh)} weights ({headless_encoder_dir} has none)"
    printed = capfd.readouterr()
    assert not re.search("corrupted|LOAD REPORT|MISSING|UNEXPECTED|Loading weights", printed.out + printed.err)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lit_docemb.models.encoder"):
        HFEncoder(tiny_encoder_dir, with_mlm_head=True)  # saved with its head: nothing to say
        HFEncoder(headless_encoder_dir)  # no head wanted; BERT's unused pooler is not worth a line
    assert caplog.records == []


def test_an_encoder_saved_without_bert_pooler_loads_without_a_missing_weights_line(headless_encoder_dir, tmp_path,
                                                                                     caplog, monkeypatch):
    """The encoder drops BERT's pooler, so what lit_docemb saves (a run's export, CoLDE's chunk encoder) has none;
    loading it back must not say pooler weights were "initialised at random": they are never used."""
    monkeypatch.delenv("LIT_DOCEMB_VERBOSE", raising=False)
    saved = HFEncoder(headless_encoder_dir)
    saved.model.save_pretrained(tmp_path)  # without the pooler
    AutoTokenizer.from_pretrained(headless_encoder_dir).save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING, logger="lit_docemb.models.encoder"):
        HFEncoder(str(tmp_path))
    assert caplog.records == []


def test_lit_docemb_verbose_shows_transformers_loading_report(headless_encoder_dir, caplog, monkeypatch):
    monkeypatch.setenv("LIT_DOCEMB_VERBOSE", "1")
    with caplog.at_level(logging.WARNING):
        HFEncoder(headless_encoder_dir, with_mlm_head=True)
    assert any("LOAD REPORT" in r.getMessage() and "MISSING" in r.getMessage() for r in caplog.records)


def test_rate_is_per_second_or_seconds_per_step():
    assert rate_text(0, 12.0) == "-" and rate_text(3, None) == "-"
    assert rate_text(10, 4.0) == "2.50it/s"
    assert rate_text(2, 90.0) == "45.0s/it"  # Rich's own column printed 0.00it/s for steps this slow


def test_the_default_rich_bar_becomes_the_rate_bar_and_a_configured_one_is_kept():
    class Trainer:
        def __init__(self, callbacks):
            self.callbacks = callbacks

    default = Trainer([ModelCheckpoint(), RichProgressBar()])
    use_rate_progress_bar(default, [Namespace(class_path="lightning.pytorch.callbacks.ModelCheckpoint")])
    assert [type(c) for c in default.callbacks] == [ModelCheckpoint, RateProgressBar]
    configured = Trainer([RichProgressBar(leave=True)])
    use_rate_progress_bar(configured, Namespace(class_path="lightning.pytorch.callbacks.RichProgressBar"))
    assert [type(c) for c in configured.callbacks] == [RichProgressBar]


def test_rate_bar_last_column_renders_the_mean_rate():
    from rich.progress import Progress

    columns = RateProgressBar().configure_columns(trainer=None)
    progress = Progress(*columns, auto_refresh=False)
    task = progress.add_task("Epoch 0", total=10)
    progress.update(task, completed=2)
    state = progress.tasks[0]
    state.start_time -= 60.0  # two steps in about a minute
    assert re.fullmatch(r"3\d\.\ds/it", columns[-1].render(state).plain)


def test_a_learning_rate_monitor_without_a_logger_is_left_out_in_one_line(caplog, tmp_path):
    import lightning as L

    callbacks = [ModelCheckpoint(), LearningRateMonitor(), DeviceStatsMonitor()]
    with caplog.at_level(logging.INFO):
        silent = L.Trainer(logger=False, callbacks=list(callbacks), default_root_dir=tmp_path)
        drop_monitors_without_logger(silent)
    assert not any(isinstance(c, (LearningRateMonitor, DeviceStatsMonitor)) for c in silent.callbacks)
    assert any(isinstance(c, ModelCheckpoint) for c in silent.callbacks)
    assert [r.getMessage() for r in caplog.records if "trainer.logger" in r.getMessage()] == [
        f"trainer.logger is false: the {name} of trainer.callbacks has nowhere to log and is left out"
        for name in ("LearningRateMonitor", "DeviceStatsMonitor")]
    logged = L.Trainer(callbacks=list(callbacks), default_root_dir=tmp_path)  # a logger: kept
    drop_monitors_without_logger(logged)
    assert any(isinstance(c, LearningRateMonitor) for c in logged.callbacks)
