"""CUDA-graph trees' messages read without torch: skips, re-records and their reasons, from recorded
and source-written logs.

``torch-2.11-cudagraphs.txt`` was recorded on an H100; the 2.13 and older
files were written from those versions' source strings and logs quoted in
pytorch's pull requests (no GPU here).
"""

from __future__ import annotations

import pytest

from nocompile_testing import DATA
from pytest_nocompile.features.cudagraphs.cudagraph_messages import (
    RERECORD,
    SKIP,
    CudagraphTracker,
    parse_skip,
    rerecord_reason,
)


def scenarios(name: str) -> dict[str, list[str]]:
    """A recording's messages by scenario: '===== NAME' sections of '-----'-separated blocks, '#'
    lines left out."""
    sections: dict[str, list[str]] = {}
    blocks: list[list[str]] = []
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("===== "):
            blocks = sections.setdefault(line[6:], [])  # type: ignore[assignment]
        elif line == "-----":
            blocks.append([])
        elif blocks and not line.startswith("# "):
            blocks[-1].append(line)
    return {name: ["\n".join(block) for block in blocks] for name, blocks in sections.items()}


def read_all(messages: list[str]) -> list[tuple[str, str]]:
    tracker = CudagraphTracker()
    return [found for found in map(tracker.read, messages) if found is not None]


TORCH_2_11 = scenarios("torch-2.11-cudagraphs.txt")
TORCH_2_13 = scenarios("torch-2.13-cudagraphs.txt")
OLDER = scenarios("torch-older-cudagraphs.txt")


def test_a_static_input_whose_pointer_changed_is_one_re_record_with_its_reason_on_2_11() -> None:
    assert read_all(TORCH_2_11["static_input_changed"]) == [
        (RERECORD, "partition_0 of compile 0/0 recorded again: static input data pointer changed "
                   "(input arg0_1)")]


def test_a_reason_logged_for_a_graph_that_is_then_replayed_is_no_re_record() -> None:
    # 2.11 logs "Re-recording" for each recorded graph that does not fit, even when the next one
    # does.
    last_reason = TORCH_2_11["static_input_changed"][-1]
    assert last_reason.startswith("[0/0] Re-recording function=partition_0")
    assert read_all(TORCH_2_11["static_input_changed"][-1:]) == []


def test_each_new_dynamic_size_after_the_first_is_a_re_record_naming_the_size() -> None:
    assert read_all(TORCH_2_11["dynamic_sizes"]) == [
        (RERECORD, "partition_0 of compile 0/0 recorded again: a new size (symint key 8)"),
        (RERECORD, "partition_0 of compile 0/0 recorded again: a new size (symint key 16)")]


@pytest.mark.parametrize("scenario", ["foreach_map_adam_static", "new_parameter_argument"])
def test_a_function_recorded_once_has_no_re_record_and_no_skip(scenario: str) -> None:
    assert read_all(TORCH_2_11[scenario]) == []


def test_a_mutated_input_is_a_skip_naming_the_mutation_and_its_line() -> None:
    assert (read_all(TORCH_2_11["mutated_input"])
            == [(SKIP, "mutated inputs (1 instances)\nat b.py:3 in count_calls: calls.add_(1)")])
    ((signal, reason),) = read_all(TORCH_2_11["foreach_map_adam"])
    assert signal == SKIP and reason.startswith("mutated inputs (21 instances)\nat ")
    assert reason.endswith(
        "examples/foreach_map_adam.py:113 in foreach_map_adam_step: step.add_(1)")


def test_torch_2_13_words_recordings_with_their_mode_and_quotes_the_inputs_line() -> None:
    assert read_all(TORCH_2_13["static_input_changed"]) == [
        (RERECORD, "partition_0 of compile 0/0 recorded again: static input data pointer changed "
                   "(input primals_1)\n"
                   "at /home/user/test_model.py:12 in forward: return self.linear(x)")]


def test_a_forward_and_its_backward_are_two_functions_and_only_the_forward_re_records() -> None:
    assert read_all(TORCH_2_13["training_step"]) == [
        (RERECORD, "partition_0 of compile 1/0 recorded again: cudagraph managed tensor data "
                   "pointer changed (input primals_2)")]


def test_a_re_record_limit_and_a_cpu_device_are_skips_with_a_one_line_reason() -> None:
    assert read_all(TORCH_2_13["rerecord_limit"]) == [
        (SKIP, "function 0 exceeding max re-recording limit (=128) on cudagraph node 3 due to "
               "cudagraph managed tensor data pointer changed"),
        (SKIP, "cpu device (arg1_1)\n"
               "at /home/user/test_model.py:7 in f: return x.sin() + y.cos().sum().cuda()")]


def test_older_torch_counts_a_function_id_recorded_twice_and_reads_skips_from_perf_hints() -> None:
    assert (read_all(OLDER["static_input_changed"])
            == [(RERECORD, "function 0 recorded again: torch gave no reason")])
    assert read_all(OLDER["mutated_input"]) == [
        (SKIP, "mutated inputs (1 instances)\n"
               "at /home/user/test_model.py:3 in count_calls: calls.add_(1)")]


def test_graph_id_0_is_a_new_tree_manager_after_a_reset_so_its_first_recording_is_no_re_record(
) -> None:
    first = TORCH_2_11["foreach_map_adam_static"]
    assert read_all(first + first) == []


def test_threads_have_their_own_trees() -> None:
    tracker = CudagraphTracker()
    recording = "[0/0] Recording function=partition_0, cuda_graph_id=0, inputs: []"
    assert tracker.read(recording, "MainThread") is None
    assert tracker.read(recording.replace("id=0", "id=1"), "worker") is None
    assert tracker.read(recording.replace("id=0", "id=2"), "MainThread") == (
        RERECORD, "partition_0 of compile 0/0 recorded again: torch gave no reason")


def test_other_messages_are_neither() -> None:
    assert parse_skip("Created 1 graph partitions: 1 cudagraphable, 0 non-cudagraphable") is None
    assert (rerecord_reason("expected dead indices before graph are live")
            == "expected dead indices before graph are live")
    assert read_all(["[0/0] Running warmup function=partition_0",
                     "CUDAGraph supports dynamic shapes by recording a new graph"]) == []


def test_older_torch_with_named_function_ids_counts_an_id_recorded_again_but_not_a_new_size(
) -> None:
    # There each new size is a new function id: not counted as a re-record (torch >= 2.11's are, by
    # name and compile id).
    assert (read_all(OLDER["named_function_ids"])
            == [(RERECORD, "function 1 recorded again: torch gave no reason")])


def steps_2_11(*sizes: str) -> list[str]:
    """A training step's messages in torch 2.11's wording (no mode): forward and backward share
    compile id and name."""
    messages: list[str] = []
    # each new size: a new tree for forward and backward, a warm-up of each, then their recordings
    for size in sizes:
        messages += [f"Recording cudagraph tree for symint key {size}",
                     "[0/0] Running warmup function=partition_0",
                     f"Recording cudagraph tree for symint key ({size}, {size})",
                     "[0/0] Running warmup function=partition_0"]
        messages += [f"[0/0] Recording function=partition_0, cuda_graph_id={graph}, inputs: []"
                     for graph in ("0", "1")]
    return messages


def test_a_backward_sharing_its_forwards_compile_id_and_name_is_not_a_re_record_of_it() -> None:
    messages = steps_2_11("8")
    messages[0] = messages[2] = "Recording cudagraph tree for graph without symints"
    assert read_all(messages) == []
    assert read_all(steps_2_11("8")) == []


def test_a_new_size_of_a_training_step_is_a_re_record() -> None:
    messages = steps_2_11("8", "16")
    messages[-2:] = [message.replace("id=0", "id=2").replace("id=1", "id=3")
                     for message in messages[-2:]]
    assert read_all(messages) == [
        (RERECORD, "partition_0 of compile 0/0 recorded again: a new size (symint key 16)")]


@pytest.mark.parametrize("scenario", ["training_step", "two_functions_chained"])
def test_recorded_on_2_11_a_training_steps_forward_and_backward_and_two_chained_functions_are_no_re_records(  # noqa: E501
    scenario: str
) -> None:
    assert read_all(TORCH_2_11[scenario]) == []


def test_recorded_on_2_11_each_new_size_of_a_training_step_is_one_re_record() -> None:
    assert read_all(TORCH_2_11["training_step_dynamic_sizes"]) == [
        (RERECORD, "partition_0 of compile 0/0 recorded again: a new size (symint key 8)"),
        (RERECORD, "partition_0 of compile 0/0 recorded again: a new size (symint key 16)")]


def test_the_log_source_arms_for_exactly_the_signals_this_reader_emits() -> None:
    # CudagraphLogs spells them out (importing this reader would load it in every run): they must
    # stay equal.
    from pytest_nocompile.features.cudagraphs.cudagraph_logs import CudagraphLogs

    assert CudagraphLogs.signals == {RERECORD, SKIP}


def test_a_reason_in_a_new_wording_is_shown_raw_and_marked_not_read() -> None:
    # a future torch that rewords "Re-recording function=..., reason=...": the re-record is still
    # counted by its second recording, and its reason is not "torch gave no reason"
    recording = "[0/0] Recording function=partition_0, cuda_graph_id={}, inputs: []"
    reworded = ("[0/0] partition_0 must re-record: static input data pointer changed.\n"
                "input name: arg0_1. data pointer changed from 0x1 to 0x2.")
    assert read_all([recording.format(0), reworded, recording.format(1)]) == [
        (RERECORD, "partition_0 of compile 0/0 recorded again: torch's reason not read (a form "
                   "pytest-nocompile does not know): [0/0] partition_0 must re-record: static "
                   "input data pointer changed.")]
    # an unread message is one recording's: the next re-record without one gave no reason
    assert read_all([recording.format(0), reworded, recording.format(1), recording.format(2)])[
        1] == (RERECORD, "partition_0 of compile 0/0 recorded again: torch gave no reason")
