"""The τ²-bench task schema (spec §2), validated with pydantic: unknown keys are ignored (as in τ²-bench), a task
that does not fit the schema is reported by the loader and left out. ``str(user_scenario)`` renders exactly as the
user simulator receives it (spec §5)."""
from __future__ import annotations

import textwrap
from enum import Enum
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, Field

Requestor = Literal["user", "assistant"]


class StructuredInstructions(BaseModel):
    domain: str
    reason_for_call: str
    known_info: Optional[str] = None
    unknown_info: Optional[str] = None
    task_instructions: str

    def __str__(self) -> str:
        lines = [f"Domain: {self.domain}", f"Reason for call:\n{textwrap.indent(self.reason_for_call, chr(9))}"]
        if self.known_info is not None:
            lines.append(f"Known info:\n{textwrap.indent(self.known_info, chr(9))}")
        if self.unknown_info is not None:
            lines.append(f"Unknown info:\n{textwrap.indent(self.unknown_info, chr(9))}")
        lines.append(f"Task instructions:\n{textwrap.indent(self.task_instructions, chr(9))}")
        return "\n".join(lines)


class UserScenario(BaseModel):
    persona: Optional[str] = None
    instructions: Union[StructuredInstructions, str]

    def __str__(self) -> str:
        lines = []
        if self.persona is not None:
            lines += ["Persona:", textwrap.indent(self.persona, "\t")]
        lines += ["Instructions:", textwrap.indent(str(self.instructions), "\t")]
        return "\n".join(lines)


class Description(BaseModel):
    purpose: Optional[str] = None
    relevant_policies: Optional[str] = None
    notes: Optional[str] = None


class Action(BaseModel):
    action_id: str
    requestor: Requestor = "assistant"
    name: str
    arguments: dict[str, Any]
    info: Optional[str] = None
    compare_args: Optional[list[str]] = None

    def matches(self, name: str, arguments: dict[str, Any]) -> bool:
        """Whether a tool call matches this action (spec §4.5): the same name and equal values on ``compare_args``
        (all of the call's argument keys when it is null; ``[]`` means the name alone)."""
        if self.name != name:
            return False
        keys = list(arguments.keys()) if self.compare_args is None else self.compare_args
        if len(keys) == 0:
            return True
        return ({k: v for k, v in arguments.items() if k in keys}
                == {k: v for k, v in self.arguments.items() if k in keys})


class EnvFunctionCall(BaseModel):
    env_type: Requestor
    func_name: str
    arguments: dict[str, Any]


class EnvAssertion(EnvFunctionCall):
    assert_value: bool = True
    message: Optional[str] = None


class InitializationData(BaseModel):
    agent_data: Optional[dict[str, Any]] = None
    user_data: Optional[dict[str, Any]] = None


class InitialState(BaseModel):
    initialization_data: Optional[InitializationData] = None
    initialization_actions: Optional[list[EnvFunctionCall]] = None
    message_history: Optional[list[dict[str, Any]]] = None


class RewardType(str, Enum):
    DB = "DB"
    ENV_ASSERTION = "ENV_ASSERTION"
    NL_ASSERTION = "NL_ASSERTION"
    ACTION = "ACTION"
    COMMUNICATE = "COMMUNICATE"


class EvaluationCriteria(BaseModel):
    actions: Optional[list[Action]] = None
    env_assertions: Optional[list[EnvAssertion]] = None
    communicate_info: Optional[list[str]] = None
    nl_assertions: Optional[list[str]] = None
    reward_basis: list[RewardType] = Field(default_factory=lambda: [RewardType.DB, RewardType.COMMUNICATE])


class Task(BaseModel):
    id: str
    description: Optional[Description] = None
    user_scenario: UserScenario
    ticket: Optional[str] = None
    initial_state: Optional[InitialState] = None
    evaluation_criteria: Optional[EvaluationCriteria] = None
    issues: Optional[list[dict[str, Any]]] = None

    @property
    def basis(self) -> list[str]:
        return [r.value for r in self.evaluation_criteria.reward_basis] if self.evaluation_criteria else []

    @property
    def summary(self) -> str:
        """One line about the task (its reason for call), for listings."""
        instructions = self.user_scenario.instructions
        text = instructions.reason_for_call if isinstance(instructions, StructuredInstructions) else instructions
        return " ".join(text.split())
