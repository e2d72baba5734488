"""Watch a model act: a live rollout against an MCP server the engine started, step by step."""
from __future__ import annotations

import asyncio

from rich.markup import escape
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Button, Header, Input, Select, Static, TabbedContent, TabPane

from awm_engine.agent.endpoints import ConfigError, endpoint_names, load_config, read_system_prompt, resolve_endpoint
from awm_engine.agent.policies import LLMPolicy
from awm_engine.agent.rollout import AgentConfig, FormatError, Observation, RolloutFinished
from awm_engine.data.catalog import Scenario
from awm_engine.data.terminal import visible
from awm_engine.eval.episode import default_run_dir, run_episode
from awm_engine.runtime.mcp_client import McpEpisode

from ..actions import bindings
from ..widgets.footer import KeyFooter
from ..widgets.transcript import Transcript
from ..widgets.verdict import SideBySide
from .leaving import screen_left

CUSTOM = "(base URL and model below)"


class RolloutScreen(Screen):
    SCOPE = "rollout"
    BINDINGS = bindings("rollout")
    DEFAULT_CSS = """
    RolloutScreen #rollout-tabs { height: 1fr; }
    RolloutScreen #task { height: auto; padding: 0 1; background: $boost; }
    RolloutScreen #controls { height: auto; }
    RolloutScreen #endpoint { width: 36; }
    RolloutScreen #base-url { width: 1fr; }
    RolloutScreen #model { width: 24; }
    RolloutScreen #mode { width: 14; }
    RolloutScreen #state { height: auto; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, scenario: Scenario, task_idx: int, base_url: str | None = None, model: str | None = None,
                 mode: str = "meta"):
        super().__init__()
        self.scenario = scenario
        self.task_idx = task_idx
        self.initial = (base_url, model, mode)
        self.gate = asyncio.Event()
        self.run_to_end = False
        self.run_dir = None
        self.episode: McpEpisode | None = None
        self.finished: RolloutFinished | None = None
        self.reports = None
        self.running = False
        self.stopped = False  # x: the run was stopped; its worker may still be unwinding
        self.generation = 0  # which run is current: a stopped run's worker never touches the next one
        self.turn = 0  # the last turn shown

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text.assemble((f"Task {self.task_idx}: ", "bold"), visible(self.scenario.tasks[self.task_idx])),
                     id="task")
        try:
            names = endpoint_names()
        except ConfigError:
            names = []
        base_url, model, mode = self.initial
        with Horizontal(id="controls"):
            yield Select([(n, n) for n in names] + [(CUSTOM, CUSTOM)], value=names[0] if names and not base_url
                         else CUSTOM, id="endpoint", allow_blank=False)
            yield Input(value=base_url or "", placeholder="base URL, e.g. http://127.0.0.1:8000/v1", id="base-url")
            yield Input(value=model or "", placeholder="model", id="model")
            yield Select([("meta", "meta"), ("native", "native")], value=mode, id="mode", allow_blank=False)
            yield Button("Start", id="start", variant="primary")
        yield Static("choose an endpoint, then Start (n: next step · r: run to end · space: pause · x: stop)",
                     id="state")
        with TabbedContent(id="rollout-tabs", initial="live"):
            with TabPane("Transcript", id="live"):
                yield Transcript(id="transcript")
            with TabPane("Verdict", id="verdict-tab"):
                yield SideBySide(id="side")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.title = f"Live rollout · {self.scenario.name}"
        if not getattr(self.app, "cursor_blink", True):
            for field in self.query(Input):
                field.cursor_blink = False

    def state(self, text: str) -> None:
        if not screen_left(self):  # the rollout worker may outlive the screen by a moment
            self.query_one("#state", Static).update(text)

    def endpoint(self):
        choice = self.query_one("#endpoint", Select).value
        base_url = self.query_one("#base-url", Input).value.strip() or None
        model = self.query_one("#model", Input).value.strip() or None
        mode = self.query_one("#mode", Select).value
        name = None if choice == CUSTOM else choice
        return resolve_endpoint(name, base_url, model, mode=mode, config=load_config())

    # -- controls --------------------------------------------------------------------------------
    def action_start(self) -> None:
        if self.running:
            return
        try:
            endpoint = self.endpoint()
        except ConfigError as exc:
            self.notify(visible(exc), title="endpoint", severity="error", markup=False)
            return
        self.running, self.stopped, self.turn = True, False, 0
        self.run_to_end = False  # a new run starts paused before its first step (r after this runs it to the end)
        self.generation += 1
        self.finished, self.reports, self.episode = None, None, None
        self.query_one("#start", Button).disabled = True
        self.new_transcript()
        self.run_rollout(endpoint)

    def new_transcript(self) -> None:
        """A new run starts on an empty transcript and an empty verdict view."""
        transcript = self.query_one(Transcript)
        transcript.remove_children()
        transcript.events.clear()
        transcript.env_errors = 0
        self.query_one(SideBySide).show(None)
        self.query_one(TabbedContent).active = "live"
        transcript.focus()

    def action_next_step(self) -> None:
        if not self.running:
            self.action_start()
            return
        self.run_to_end = False
        self.gate.set()

    def action_run_to_end(self) -> None:
        if not self.running:
            self.action_start()
            if not self.running:  # it could not start (the endpoint is said)
                return
        self.run_to_end = True
        self.gate.set()

    def action_pause(self) -> None:
        self.run_to_end = False
        if self.running:
            self.state("pausing after this step")

    def action_stop(self) -> None:
        if not self.running:
            return
        for worker in self.workers:
            if worker.group == "rollout":
                worker.cancel()
        self.stopped, self.running = True, False
        self.query_one("#start", Button).disabled = False
        where = f"after turn {self.turn}" if self.turn else "before the first step"
        self.state(f"stopped {where} · n or ctrl+r starts a new run")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()

    # -- the rollout ---------------------------------------------------------------------------------
    @work(exclusive=True, group="rollout")
    async def run_rollout(self, endpoint) -> None:
        generation = self.generation
        run_dir = default_run_dir(self.scenario, self.task_idx, self.app.runs_root / "agents").resolve()
        self.run_dir = run_dir
        self.sub_title = str(run_dir)
        self.state(f"starting an MCP server for {self.scenario.key}…")
        try:
            config = AgentConfig(mode=endpoint.mode, system_prompt=read_system_prompt(endpoint=endpoint))
        except ConfigError as exc:
            self.running = False
            self.state(f"[red]{escape(str(exc))}[/red]")
            return
        policy = LLMPolicy(endpoint)
        try:
            outcome = await run_episode(self.app.catalog, self.scenario, self.task_idx, policy, config, run_dir, backend="mcp", verify_mode="both",
                                        judge=self.app.judge_endpoint(), on_open=self.episode_opened,
                                        on_event=self.on_step,
                                        meta={"model": endpoint.model, "api_url": endpoint.base_url})
        finally:
            await policy.aclose()
            if generation == self.generation and not self.stopped:
                self.running = False
                if not screen_left(self):
                    self.query_one("#start", Button).disabled = False
        if generation != self.generation or self.stopped or screen_left(self):
            return
        if outcome.failure is not None:
            self.state(f"[red]could not start the episode: {escape(str(outcome.failure))}[/red]")
            return
        self.finished = outcome.finished
        report = outcome.verification
        self.reports = report.to_dict()
        if not screen_left(self):
            self.query_one(SideBySide).show_report(self.reports, self.finished.env_errors,
                                                   self.finished.stop_reason)
        self.state(f"finished: {self.finished.stop_reason} · {report.label} · reward {report.reward}")

    async def episode_opened(self, episode) -> None:
        if self.stopped or screen_left(self):
            return
        self.episode = episode
        self.state(f"MCP server at {episode.url} · {len(episode.tools)} tools · paused before the "
                   "first step (n: step · r: run to end)")
        if not self.run_to_end:
            await self.wait_gate()

    async def on_step(self, event) -> None:
        if screen_left(self) or self.stopped:
            return
        self.turn = getattr(event, "iteration", None) or self.turn
        self.query_one(Transcript).add_event(event)
        if isinstance(event, RolloutFinished):
            self.state(f"finished: {event.stop_reason} · verifying…")
            side = self.query_one(SideBySide)
            self.query_one(TabbedContent).active = "verdict-tab"
            side.query_one("#verdict-pane").focus()  # focus left in the other tab would switch it back
            side.show_finished(self.run_dir, event.env_errors, event.stop_reason)
        elif isinstance(event, (Observation, FormatError)) and not self.run_to_end:
            self.state(f"paused after turn {event.iteration} · n: next step · r: run to end · x: stop")
            await self.wait_gate()
        else:
            self.state(f"running turn {getattr(event, 'iteration', 0)}…")

    async def wait_gate(self) -> None:
        self.gate.clear()
        await self.gate.wait()

    def action_back(self) -> None:
        self.action_stop()
        self.app.pop_screen()
