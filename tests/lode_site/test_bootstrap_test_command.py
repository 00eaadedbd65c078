"""The README's test command runs pytest in parallel unless the caller chooses otherwise.

Pure: builds pytest's argument list, and checks the parallel runner is installed.
"""

from __future__ import annotations

import importlib.util

import pytest

from lode_site.bootstrap import PARALLEL_ARGS, pytest_args


def test_the_default_runs_one_worker_per_core_keeping_each_file_on_one_worker() -> None:
    assert pytest_args([]) == ["-n", "auto", "--dist", "loadfile"]


def test_the_callers_arguments_follow_the_parallel_default() -> None:
    assert pytest_args(["-k", "search", "-x"]) == [*PARALLEL_ARGS, "-k", "search", "-x"]
    assert pytest_args(["-m", "not slow"]) == [*PARALLEL_ARGS, "-m", "not slow"]


@pytest.mark.parametrize(
    "chosen",
    [
        ["-n", "0"],
        ["-n0"],
        ["-n", "4"],
        ["--numprocesses=3"],
        ["--numprocesses", "2"],
        ["-p", "no:xdist"],
        ["--dist", "load", "-n", "2"],
        ["-q", "-n", "0", "tests/lode_site"],
    ],
)
def test_a_caller_who_chooses_workers_gets_exactly_their_arguments(chosen: list[str]) -> None:
    assert pytest_args(chosen) == chosen


def test_a_test_path_or_keyword_starting_like_a_flag_value_does_not_turn_parallel_off() -> None:
    # "-k" values and paths are not worker choices.
    assert pytest_args(["-k", "not_slow", "tests/notes"])[:4] == list(PARALLEL_ARGS)


def test_the_parallel_runner_is_installed_with_the_test_tools() -> None:
    assert importlib.util.find_spec("xdist") is not None
