"""Python and the CLI run the same pipeline through the library (issue 24, item 7):
the same input and options give the same bytes from ``cutpoint.compact`` and from
``cutpoint compact --strategy``, on every real transcript fixture, every strategy and
preset, and the same exit (met or over budget). The CLI binary is the one
``cargo test`` builds (``scripts/test.sh`` runs it first); it is required, never
skipped."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import cutpoint

from logs import TRANSCRIPTS

ROOT = Path(__file__).resolve().parents[2]


def cli() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for profile in ("debug", "release"):
        exe = target / profile / "cutpoint"
        if exe.exists():
            return exe
    raise AssertionError(f"no cutpoint binary under {target}: run `cargo build -p cutpoint-cli` first")


# Every fixture of a format cutpoint reads (a tau-bench results file and an OpenHands
# event list are refused by both, as the CLI tests show).
PREFIXES = ("claude-code__", "codex__", "openai-chat__", "chat__swe-agent", "gemini-cli-session__")
FIXTURES = sorted(p.name for p in TRANSCRIPTS.iterdir() if p.name.startswith(PREFIXES))

ROUTES = [
    ("clear", {}),
    ("clear-thinking", {}),
    ("digest", {}),
    ("slide", {}),
    ("truncate", {}),
    ("pipeline", {"preset": "gentle"}),
    ("pipeline", {"preset": "balanced"}),
    ("pipeline", {"preset": "aggressive"}),
]


@pytest.mark.parametrize("name", FIXTURES)
def test_python_and_the_cli_write_the_same_bytes(name: str) -> None:
    path = TRANSCRIPTS / name
    text = path.read_text()
    stats = subprocess.run([str(cli()), "stats", "--json", str(path)], capture_output=True, text=True)
    if stats.returncode != 0:
        pytest.fail(f"{name}: stats failed: {stats.stderr}")

    live = json.loads(stats.stdout)["tokens"]
    assert live > 0, name
    for strategy, extra in ROUTES:
        budget = max(1, live * 45 // 100)
        args = [str(cli()), "compact", "--strategy", strategy, "--budget", str(budget)]
        for k, v in extra.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        done = subprocess.run(args + [str(path)], capture_output=True)
        report = cutpoint.compact_report(text, strategy=strategy, budget=budget, **extra)
        case = f"{name} {strategy} {extra} at {budget}"
        if done.returncode == 0:
            assert report.met_budget, f"{case}: the CLI met the budget, Python did not"
            out = report.messages
            assert out.encode() == done.stdout, f"{case}: different bytes"
        else:
            assert done.returncode == 3, f"{case}: {done.stderr!r}"
            assert not report.met_budget, f"{case}: Python met the budget, the CLI did not"
    # Python's `summarize` is the CLI's `--target` route (one summary at a token
    # target), not the pipeline's summarize stage.
    target = max(1, live * 55 // 100)
    done = subprocess.run([str(cli()), "compact", "--target", str(target), str(path)], capture_output=True)
    case = f"{name} summarize --target {target}"
    try:
        report = cutpoint.compact_report(text, strategy="summarize", target=target)
    except cutpoint.DeferError:
        assert done.returncode == 3, f"{case}: Python deferred, the CLI did not: {done.stderr!r}"
        return
    assert done.returncode == 0, f"{case}: {done.stderr!r}"
    out = report.messages if isinstance(report.messages, str) else text
    assert out.encode() == done.stdout, f"{case}: different bytes"
