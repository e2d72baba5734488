"""``awm env doctor`` on τ² domains (issue 24): "solved at start" is what τ²'s own evaluator says of a conversation
of the agent's greeting and the user's stop — on the shared retail data the official evaluator gives reward 1 to
8 tasks, among them task 57 whose criteria are all empty lists (no gold action, nothing to communicate)."""
from __future__ import annotations

import pytest

from awm_engine.bench.tau2.data import Tau2Data
from awm_engine.bench.tau2.doctor import task_problems
from awm_engine.bench.tau2.episode import DomainScenario
from tests.conftest import SHARED

TAU2 = SHARED / "data" / "tau2"
# the official τ² evaluator's reward-1 tasks on greeting + stop (retail, base split)
OFFICIAL_SOLVED_AT_START = {"10", "12", "18", "25", "50", "57", "65", "105"}


@pytest.fixture(scope="module")
def retail() -> DomainScenario:
    if not (TAU2 / "domains" / "retail" / "tasks.json").is_file():
        pytest.skip(f"τ²-bench data not found at {TAU2} (../shared is absent)")
    return DomainScenario(Tau2Data(TAU2), "retail")


def test_solved_at_start_lists_the_eight_retail_tasks_including_57(retail):
    listed = {}
    for index, task in enumerate(retail.tau2_tasks):
        for problem in task_problems(retail, index):
            if problem.kind == "solved_at_start":
                assert problem.task == index and problem.severity == "info"
                listed[task.id] = problem
    assert set(listed) == OFFICIAL_SOLVED_AT_START
    task57 = retail.tau2_task(retail.index_of("57"))
    criteria = task57.evaluation_criteria
    assert criteria.actions == [] and criteria.communicate_info == []  # all empty: why it was missed before
    assert '"DB": 1.0' in listed["57"].detail and "leaving the state as it is" in listed["57"].message

