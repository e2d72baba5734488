"""The documentation runs as written: every shell block of README.md and docs/*.md is either marked as needing
something a test cannot have (``<!-- needs: model endpoint -->`` before its fence) or run here on the bundled
sample environments, with the output the text states checked (tests/docs_blocks.py says how a block states one).

Blocks of one file run in order in one working directory of their own (a later block may use what an earlier one
made, as a reader following the page would), with the repository's sample_envs, scripts and the generation demo's
assets copied in, ``.venv`` linked, and the venv's commands first on PATH. Running one block runs the blocks
before it in its file first. The relative links must point at files (and headings) that exist, and the README
stays a front door: at most 16,000 bytes.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docs_blocks as db  # noqa: E402

ROOT = db.ROOT
BLOCKS = db.all_blocks()
RUNNABLE = [b for b in BLOCKS if not b.needs]
BLOCK_TIMEOUT = 300  # seconds per block
VENV = Path(sys.prefix)  # the environment running the tests: its awm, python and awm-tui
README_MAX_BYTES = 16_000


class Workspaces:
    """One working directory per Markdown file; the blocks run so far, with their outcome."""

    def __init__(self, base: Path):
        self.base = base
        self.dirs: dict[Path, Path] = {}
        self.done: dict[str, subprocess.CompletedProcess] = {}

    def for_file(self, path: Path) -> Path:
        if path not in self.dirs:
            work = self.base / path.relative_to(ROOT).as_posix().replace("/", "_").removesuffix(".md")
            work.mkdir(parents=True)
            for name in ("sample_envs", "scripts"):
                shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
            shutil.copytree(ROOT / "assets" / "gen_demo", work / "assets" / "gen_demo")
            (work / ".venv").symlink_to(VENV)
            self.dirs[path] = work
        return self.dirs[path]

    def env(self, work: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENAI_", "AWM_JUDGE", "VIRTUAL_ENV", "PYTEST"))}
        env.update(PATH=f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                   AWM_CONFIG=str(work / "no-config.toml"), COLUMNS="120", TERM="dumb", NO_COLOR="1")
        return env

    def run(self, block: db.Block) -> subprocess.CompletedProcess:
        if block.id in self.done:
            return self.done[block.id]
        for earlier in RUNNABLE:  # what the page did before this block
            if earlier.path == block.path and earlier.line < block.line and earlier.id not in self.done:
                self.run(earlier)
        work = self.for_file(block.path)
        proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", block.body], cwd=work, env=self.env(work),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            out += f"\n[test_docs: timed out after {BLOCK_TIMEOUT} s]"
        finally:  # whatever the block left in the background
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        done = subprocess.CompletedProcess(block.body, proc.returncode, out)
        self.done[block.id] = done
        return done


@pytest.fixture(scope="session")
def workspaces(tmp_path_factory):
    return Workspaces(tmp_path_factory.mktemp("docs_blocks"))


def test_blocks_are_found():
    assert any(b.path.name == "README.md" for b in RUNNABLE), "the README's tour has no shell block to run"
    assert len(RUNNABLE) >= 10


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_needs_are_known(block):
    unknown = [n for n in block.needs if n not in db.NEEDS]
    assert not unknown, f"{block.id}: unknown needs {unknown}; known: {sorted(db.NEEDS)}"
    if block.path.name == "README.md" and block.needs:
        # the tour runs as written: only the TUI (and the make lines that open it or run every test) are left out
        assert set(block.needs) <= {"long-running TUI", "long-running"}, block.id


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_block_runs_as_written(block, workspaces):
    if "awm bench bfcl" in block.body and importlib.util.find_spec("bfcl_eval") is None:
        pytest.skip("BFCL is not installed: run make bfcl (make test does)")
    done = workspaces.run(block)
    tail = done.stdout[-4000:]
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{block.body}\n--- output ---\n{tail}"
    missing = db.missing_output(block.expected, done.stdout)
    assert missing is None, f"{block.id}: documented output not found: {missing!r}\n--- output ---\n{tail}"


def _link_cases():
    return [(path, line, target) for path in db.doc_files() for line, target in db.relative_links(path)]


@pytest.mark.parametrize("path,line,target", _link_cases(),
                         ids=lambda v: v if isinstance(v, str) else (str(v) if isinstance(v, int) else
                                                                     v.relative_to(ROOT).as_posix()))
def test_relative_link_exists(path, line, target):
    file_part, _, anchor = target.partition("#")
    dest = (path.parent / file_part).resolve() if file_part else path
    where = f"{path.relative_to(ROOT)}:{line}"
    assert dest.exists(), f"{where}: link to {target} — no such file {dest}"
    if anchor and dest.suffix == ".md":
        assert anchor in db.anchors(dest), f"{where}: link to {target} — no heading #{anchor} in {dest.name}"


def test_readme_is_a_front_door():
    size = (ROOT / "README.md").stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size:,} bytes (at most {README_MAX_BYTES:,}): move detail to docs/"
    text = (ROOT / "README.md").read_text()
    # the two commands come first and stay as they are
    first = text.index("```bash\n")
    assert text[first:].startswith("```bash\nmake tui     # set up .venv and open the TUI on the bundled sample "
                                   "environments\nmake test    # set up .venv and run the whole test suite\n```")


def test_no_example_relies_on_the_projects_shared_data():
    for block in BLOCKS:
        assert "../shared" not in block.body, f"{block.id} uses ../shared, which a user does not have"
