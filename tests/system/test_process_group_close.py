"""A finished multi-process command ends its process group on every rank before the interpreter does
(:func:`lit_docemb.distributed.close_process_group`); a rank that never arrives is named, not waited on forever."""

from __future__ import annotations

from two_process import init_gloo, save_result, spawn

from lit_docemb.distributed import close_process_group, is_distributed


def _close(rank: int, port: int, out_dir: str) -> None:
    init_gloo(rank, port)
    before = is_distributed()
    close_process_group(timeout_seconds=30)
    save_result({"before": before, "after": is_distributed()}, out_dir, rank)


def test_every_rank_ends_its_group_and_a_single_process_has_nothing_to_end(tmp_path):
    assert spawn(_close, tmp_path) == [{"before": True, "after": False}] * 2
    close_process_group()  # no group in this process: nothing happens
    assert not is_distributed()


def _one_rank_missing(rank: int, port: int, out_dir: str) -> None:
    init_gloo(rank, port)
    message = ""
    if rank == 0:
        try:
            close_process_group(timeout_seconds=2)
        except RuntimeError as err:  # gloo's monitored barrier names the rank that did not arrive
            message = str(err)
    # rank 1 returns without closing: the lost peer
    save_result({"message": message}, out_dir, rank)


def test_a_rank_that_never_arrives_is_named_after_the_timeout(tmp_path):
    rank0, _ = spawn(_one_rank_missing, tmp_path)
    assert "1" in rank0["message"] and "barrier" in rank0["message"].lower(), rank0["message"]
