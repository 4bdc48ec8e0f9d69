"""Python and the CLI run the same pipeline through the library (issue 24, item 7):
the same input and options give the same bytes from ``cutpoint.compact`` and from
``cutpoint compact --strategy``, on every real transcript fixture, every strategy and
preset, and the same exit (met or over budget). The CLI binary is the one
``cargo test`` builds (``scripts/test.sh`` runs it first); it is required, never
skipped."""

from __future__ import annotations

import json
import re
import os
import random
import subprocess
from pathlib import Path
from typing import Any, Dict, List

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


def same_verdict(case: str, done: "subprocess.CompletedProcess[bytes]", text: str, run: Any) -> None:
    """The CLI's run `done` and Python's report `run()` on the same input agree: both
    defer (exit 3; a deferral for keep-thinking-valid names why), both meet the
    budget with the same bytes, or neither meets it."""
    try:
        report = run()
    except cutpoint.DeferError as e:
        assert done.returncode == 3, f"{case}: Python deferred ({e}), the CLI did not: {done.stderr!r}"
        if e.reason == "thinking_bound":
            assert b"cannot be stripped" in done.stderr, f"{case}: {done.stderr!r}"
        return
    if done.returncode == 0:
        assert report.met_budget, f"{case}: the CLI met the budget, Python did not"
        out = report.messages if isinstance(report.messages, str) else text
        assert out.encode() == done.stdout, f"{case}: different bytes"
    else:
        assert done.returncode == 3, f"{case}: {done.stderr!r}"
        assert not report.met_budget, f"{case}: Python met the budget, the CLI did not"


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
        case = f"{name} {strategy} {extra} at {budget}"
        same_verdict(case, done, text, lambda: cutpoint.compact_report(text, strategy=strategy, budget=budget, **extra))
    # Python's `summarize` with a budget is the CLI's `compact --budget` with no
    # `--strategy` (the library's `Loaded::summarize_within`): the same bytes, and
    # the same verdict.
    for share in (45, 70):
        budget = max(1, live * share // 100)
        done = subprocess.run([str(cli()), "compact", "--budget", str(budget), str(path)], capture_output=True)
        case = f"{name} summarize --budget {budget}"
        same_verdict(case, done, text, lambda: cutpoint.compact_report(text, strategy="summarize", budget=budget))
    # Python's `summarize` at a target is the CLI's `--target` route (one summary at a
    # token target), not the pipeline's summarize stage.
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


@pytest.mark.parametrize("name", FIXTURES)
def test_calibrated_budgets_are_the_clis(name: str) -> None:
    """``calibrated=True`` is the CLI's ``--calibrated``: the same fit, the same budget
    in the estimate's units, the same bytes and verdict; and both refuse a log that
    reports no usage, or an overhead over the budget."""
    path = TRANSCRIPTS / name
    text = path.read_text()
    stats = json.loads(subprocess.run([str(cli()), "stats", "--json", str(path)], capture_output=True, text=True,
                                      check=True).stdout)
    fit = stats["estimate_calibration"]
    if fit is None:
        done = subprocess.run([str(cli()), "compact", "--calibrated", "--budget", "1000", str(path)],
                              capture_output=True)
        assert done.returncode == 2 and b"reports none" in done.stderr, done.stderr
        with pytest.raises(cutpoint.CutpointError, match="reports none"):
            cutpoint.compact_report(text, strategy="summarize", budget=1000, calibrated=True)
        with pytest.raises(cutpoint.CutpointError, match="reports none"):
            cutpoint.compact_report(text, strategy="clear", budget=1000, calibrated=True)
        return
    reported = round(fit["overhead"] + fit["scale"] * stats["tokens"] * 0.6)
    checked: List[str] = []
    # Thinking kept valid (the default) first; a log whose every route defers for it
    # (a call in flight) is checked with invalidated thinking allowed too.
    routes = [("summarize", {}), ("clear", {}), ("pipeline", {"preset": "balanced"})]
    for keep_valid in (True, False):
        if checked:
            break
        for strategy, extra in routes:
            args = [str(cli()), "compact", "--calibrated", "--budget", str(reported)]
            if strategy != "summarize":
                args += ["--strategy", strategy, "--report"]
            if not keep_valid:
                args.append("--allow-invalidated-thinking")
            for k, v in extra.items():
                args += [f"--{k.replace('_', '-')}", str(v)]
            done = subprocess.run(args + [str(path)], capture_output=True)
            case = f"{name} {strategy} calibrated at {reported}, keep_thinking_valid={keep_valid}"
            opts = dict(extra, calibrated=True, keep_thinking_valid=keep_valid)
            run = lambda: cutpoint.compact_report(text, strategy=strategy, budget=reported, **opts)
            same_verdict(case, done, text, run)
            said = re.search(rb"a budget of (\d+) reported tokens is (\d+) estimated", done.stderr)
            assert said and int(said[1]) == reported, (case, done.stderr)
            try:
                report = run()
            except cutpoint.DeferError:
                continue  # the CLI deferred too (same_verdict)
            c = report.calibration
            assert c is not None and c["budget_reported"] == reported, case
            assert report.budget == c["budget_estimate"], case
            assert (c["points"], c["scale"], c["overhead"]) == (fit["points"], fit["scale"], fit["overhead"]), case
            assert int(said[2]) == c["budget_estimate"], (case, done.stderr)
            checked.append(case)
    assert checked, f"{name}: every calibrated route deferred"
    if fit["overhead"] >= 2:
        under = round(fit["overhead"]) - 2
        done = subprocess.run([str(cli()), "compact", "--calibrated", "--budget", str(under), str(path)],
                              capture_output=True)
        assert done.returncode == 3 and b"overhead alone" in done.stderr, done.stderr
        with pytest.raises(cutpoint.CutpointError, match="overhead alone"):
            cutpoint.compact_report(text, strategy="summarize", budget=under, calibrated=True)
    with pytest.raises(TypeError, match="calibrated"):
        cutpoint.compact_report(text, strategy="summarize", target=100, calibrated=True)
    with pytest.raises(TypeError, match="calibrated must be a bool"):
        cutpoint.compact_report(text, strategy="clear", budget=100, calibrated="yes")


# Records JSONL goes through the same library entry points as every other format
# (`format::Loaded`): `check` is the CLI's validator, the strategies the CLI's driver,
# and input of another kind the same mismatch.


def records_log(rng: random.Random, broken: bool) -> str:
    """A records log of a few turns with payloads (tool names and arguments, result
    status and content, thinking); `broken` adds pairing faults: an unanswered call
    left behind, an orphan result, a second result, a result after the next turn."""
    lines: List[Dict[str, Any]] = []
    n = 0
    for turn in range(rng.randint(3, 7)):
        lines.append({"kind": "user", "tokens": rng.randint(5, 60)})
        for _ in range(rng.randint(0, 3)):
            if rng.random() < 0.4:
                lines.append({"kind": "assistant", "tokens": rng.randint(5, 40), "reasoning": "signed"})
            n += 1
            cid = f"c{n}"
            lines.append(
                {"kind": "tool_use", "call_id": cid, "tokens": rng.randint(5, 30), "name": "bash",
                 "arguments": {"command": f"ls {n}"}}
            )
            fault = rng.random() if broken else 1.0
            if fault < 0.15:
                continue
            lines.append(
                {"kind": "tool_result", "call_id": cid, "tokens": rng.randint(20, 400),
                 "status": rng.choice(["ok", "error"]), "content": f"out {n}\nmore"}
            )
            if fault < 0.3:
                lines.append({"kind": "tool_result", "call_id": cid, "tokens": 3})
            elif fault < 0.4:
                lines.append({"kind": "tool_result", "call_id": f"orphan{n}", "tokens": 3})
        lines.append({"kind": "assistant", "tokens": rng.randint(5, 80)})
    return "".join(json.dumps(line) + "\n" for line in lines)


@pytest.mark.parametrize("seed", range(24))
def test_python_checks_records_as_the_cli_does(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    text = records_log(rng, broken=seed % 2 == 0)
    path = tmp_path / "log.jsonl"
    path.write_text(text)
    done = subprocess.run([str(cli()), "check", "--json", str(path)], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    want = [
        (v["rule"], v["line"], v["call_id"], v["pending_at_end"])
        for v in json.loads(done.stdout)["files"][0]["violations"]
    ]
    got = [(v.rule, v.line, v.call_id, v.pending_at_end) for v in cutpoint.check(text, format="records")]
    assert got == want
    assert (done.returncode == 0) == (got == [])


@pytest.mark.parametrize("seed", range(8))
def test_python_and_the_cli_write_the_same_records_bytes(seed: int, tmp_path: Path) -> None:
    text = records_log(random.Random(100 + seed), broken=False)
    path = tmp_path / "log.jsonl"
    path.write_text(text)
    live = sum(json.loads(line)["tokens"] for line in text.splitlines())
    for strategy, extra in ROUTES:
        budget = max(1, live * 45 // 100)
        args = [str(cli()), "compact", "--strategy", strategy, "--budget", str(budget)]
        for k, v in extra.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        done = subprocess.run(args + [str(path)], capture_output=True)
        case = f"seed {seed} {strategy} {extra} at {budget}"
        same_verdict(
            case,
            done,
            text,
            lambda: cutpoint.compact_report(text, format="records", strategy=strategy, budget=budget, **extra),
        )


def test_a_document_read_as_records_is_the_same_mismatch_everywhere(tmp_path: Path) -> None:
    body = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    path = tmp_path / "log.json"
    path.write_text(body)
    done = subprocess.run(
        [str(cli()), "compact", "--format", "records", "--strategy", "clear", "--budget", "1", str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    said = done.stderr.strip().removeprefix(f"{path}: ")
    assert said.startswith("not records input"), said
    for run in (
        lambda: cutpoint.check(body, format="records"),
        lambda: cutpoint.compact_report(body, format="records", strategy="clear", budget=1),
        lambda: cutpoint.compact_report(body, format="records", strategy="summarize", budget=1),
    ):
        with pytest.raises(cutpoint.FormatError) as e:
            run()
        assert str(e.value) == said


def test_a_bad_records_line_is_the_same_error_from_check_and_compact() -> None:
    text = '{"kind":"user","tokens":1}\n{"kind":"user","tokens":-1}\n'
    errors = []
    for run in (
        lambda: cutpoint.check(text, format="records"),
        lambda: cutpoint.compact_report(text, format="records", strategy="clear", budget=1),
        lambda: cutpoint.compact_report(text, format="records", strategy="summarize", budget=1),
    ):
        with pytest.raises(cutpoint.FormatError) as e:
            run()
        errors.append((str(e.value), e.value.line, e.value.detail))
    assert errors[0][1] == 2 and not errors[0][2].startswith("line ")
    assert errors == [errors[0]] * 3


@pytest.mark.parametrize("seed", range(8))
def test_python_summarizes_records_as_the_cli_compacts_at_a_target(seed: int, tmp_path: Path) -> None:
    # One summary at a token target on records JSONL: the same bytes (the same
    # region, no prose by default, the count estimated from the ledger), and the same
    # deferral (text included) where there is no legal cut, as for every other format.
    text = records_log(random.Random(200 + seed), broken=False)
    path = tmp_path / "log.jsonl"
    path.write_text(text)
    live = sum(json.loads(line)["tokens"] for line in text.splitlines())
    for target in (1, 3, live * 30 // 100, live * 55 // 100, live * 80 // 100):
        done = subprocess.run([str(cli()), "compact", "--target", str(target), str(path)], capture_output=True)
        case = f"seed {seed} summarize --target {target}"
        try:
            report = cutpoint.compact_report(text, format="records", strategy="summarize", target=target)
        except cutpoint.DeferError as e:
            assert done.returncode == 3, f"{case}: Python deferred, the CLI did not: {done.stderr!r}"
            said = done.stderr.decode().strip().splitlines()[-1].removeprefix("cutpoint: deferred: ")
            assert str(e) == said, case
            continue
        assert done.returncode == 0, f"{case}: {done.stderr!r}"
        if report.changed:
            assert report.messages.encode() == done.stdout, f"{case}: different bytes"
            said = done.stderr.decode().strip().splitlines()[-1]
            assert said.startswith(f"cutpoint: compact records {report.head}..{report.cut} "), case
            kept = [json.loads(line) for line in report.messages.splitlines()[report.head + 1 :]]
            assert kept == [json.loads(line) for line in text.splitlines()[report.cut :]], case


@pytest.mark.parametrize("seed", range(4))
def test_summarize_takes_the_clis_summary_options(seed: int, tmp_path: Path) -> None:
    # `summary_tokens` (records only), `shorten_arguments` and a window less the
    # output are the CLI's `--summary-tokens`, `--shorten-arguments`,
    # `--context-window`/`--max-output` on the one summary route: the same bytes.
    text = records_log(random.Random(300 + seed), broken=False)
    path = tmp_path / "log.jsonl"
    path.write_text(text)
    live = sum(json.loads(line)["tokens"] for line in text.splitlines())
    budget = live * 50 // 100
    cases = [
        ({"budget": budget, "summary_tokens": 7}, ["--budget", str(budget), "--summary-tokens", "7"]),
        ({"budget": budget, "shorten_arguments": 8}, ["--budget", str(budget), "--shorten-arguments", "8"]),
        (
            {"context_window": budget + 500, "max_output": 500},
            ["--context-window", str(budget + 500), "--max-output", "500"],
        ),
    ]
    for options, flags in cases:
        done = subprocess.run(
            [str(cli()), "compact", "--strategy", "summarize", *flags, str(path)], capture_output=True
        )
        case = f"seed {seed} {options}"
        same_verdict(
            case,
            done,
            text,
            lambda: cutpoint.compact_report(text, format="records", strategy="summarize", **options),
        )
    if seed == 0:
        summary = next(
            o for o, _ in cases if "summary_tokens" in o
        )
        report = cutpoint.compact_report(text, format="records", strategy="summarize", **summary)
        assert report.changed
        first = json.loads(report.messages.splitlines()[report.head])
        assert first["kind"] == "summary" and first["tokens"] == 7, first


def test_summary_tokens_is_refused_on_a_provider_format_as_in_the_cli() -> None:
    path = TRANSCRIPTS / "openai-chat__tau-bench__gpt-4o-airline-traj173.json"
    done = subprocess.run(
        [str(cli()), "compact", "--strategy", "summarize", "--budget", "2000", "--summary-tokens", "5", str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--summary-tokens applies to records JSONL" in done.stderr
    with pytest.raises(ValueError, match="summary_tokens applies to records JSONL"):
        cutpoint.compact(path.read_text(), strategy="summarize", budget=2000, summary_tokens=5)
    with pytest.raises(TypeError, match="context_window needs max_output"):
        cutpoint.compact(path.read_text(), strategy="summarize", context_window=5000)


def test_a_records_target_in_the_first_record_defers_as_in_the_cli(tmp_path: Path) -> None:
    # Before, Python answered "unchanged" where the CLI (and Python on every other
    # format) defers: the only legal cut the walk back reaches is the pinned head.
    text = (
        '{"kind":"user","tokens":10}\n'
        '{"kind":"tool_use","call_id":"a","tokens":5,"name":"ls","arguments":{}}\n'
        '{"kind":"tool_result","call_id":"a","tokens":50,"content":"x"}\n'
        '{"kind":"assistant","tokens":10}\n'
    )
    path = tmp_path / "log.jsonl"
    path.write_text(text)
    done = subprocess.run([str(cli()), "compact", "--target", "3", str(path)], capture_output=True, text=True)
    assert done.returncode == 3
    with pytest.raises(cutpoint.DeferError) as e:
        cutpoint.compact_report(text, format="records", strategy="summarize", target=3)
    assert f"cutpoint: deferred: {e.value}" == done.stderr.strip()


# `keep_thinking_valid=True` (the default) is the CLI's `--keep-thinking-valid` (its
# default): the same bytes where the CLI writes, and a DeferError with the CLI's reason
# where it exits 3.
THINKING = [
    "claude-code__spotter__4d5611e5-main.jsonl",
    "codex__localpush__rollout-12-41-04-parallel7.jsonl",
]


@pytest.mark.parametrize("name", THINKING)
def test_keep_thinking_valid_is_the_clis(name: str) -> None:
    path = TRANSCRIPTS / name
    text = path.read_text()
    stats = subprocess.run([str(cli()), "stats", "--json", str(path)], capture_output=True, text=True)
    live = json.loads(stats.stdout)["tokens"]
    outcomes = set()
    for strategy, extra in [("digest", {}), ("clear", {}), ("pipeline", {"preset": "balanced"})]:
        for percent in (60, 30):
            budget = max(1, live * percent // 100)
            args = [str(cli()), "compact", "--strategy", strategy, "--budget", str(budget), "--keep-thinking-valid"]
            for k, v in extra.items():
                args += [f"--{k.replace('_', '-')}", str(v)]
            done = subprocess.run(args + [str(path)], capture_output=True)
            case = f"{name} {strategy} at {percent}%"
            try:
                out = cutpoint.compact(text, strategy=strategy, budget=budget, keep_thinking_valid=True, **extra)
                default = cutpoint.compact(text, strategy=strategy, budget=budget, **extra)
            except cutpoint.DeferError as e:
                assert e.reason == "thinking_bound", case
                assert done.returncode == 3, f"{case}: Python raised, the CLI did not: {e}"
                assert "cannot be stripped" in str(e) and "cannot be stripped" in done.stderr.decode(), case
                outcomes.add("refused")
                continue
            assert done.returncode in (0, 3), f"{case}: {done.stderr!r}"
            assert default == out, f"{case}: the default is not keep_thinking_valid"
            if done.returncode == 0:
                assert out.encode() == done.stdout, f"{case}: different bytes"
                report = cutpoint.compact_report(text, strategy=strategy, budget=budget, **extra)
                assert report.simple_compaction == ("simple compaction instead" in done.stderr.decode()), case
                outcomes.add("simple" if report.simple_compaction else "written")
            else:
                assert "cannot be stripped" not in done.stderr.decode(), f"{case}: the CLI refused, Python did not"
    assert outcomes, name


def test_keep_thinking_valid_takes_a_bool() -> None:
    with pytest.raises(TypeError, match="keep_thinking_valid must be a bool"):
        cutpoint.compact('{"kind":"user","tokens":10}\n', strategy="clear", budget=5, keep_thinking_valid=1)


def warned_count(stderr: str) -> int:
    """The count in the CLI's warning that an output invalidates thinking, or 0."""
    m = re.search(r"warning: the output invalidates (\d+) ", stderr)
    return int(m.group(1)) if m else 0


@pytest.mark.parametrize("name", THINKING)
def test_invalidated_thinking_is_the_clis_count(name: str) -> None:
    """With keep_thinking_valid off (the CLI's `--allow-invalidated-thinking`), an
    output that invalidates thinking says how many blocks, in Python
    (`invalidated_thinking`) as in the CLI (its warning and the `--report` line), and
    with it (the default) the count is 0."""
    path = TRANSCRIPTS / name
    text = path.read_text()
    stats = subprocess.run([str(cli()), "stats", "--json", str(path)], capture_output=True, text=True)
    live = json.loads(stats.stdout)["tokens"]
    seen = 0
    for strategy in ("digest", "pipeline"):
        for percent in (70, 40):
            budget = max(1, live * percent // 100)
            args = [str(cli()), "compact", "--strategy", strategy, "--budget", str(budget), "--report"]
            done = subprocess.run(args + ["--allow-invalidated-thinking", str(path)], capture_output=True, text=True)
            if done.returncode != 0:
                continue
            report = cutpoint.compact_report(text, strategy=strategy, budget=budget, keep_thinking_valid=False)
            last = json.loads(done.stderr.strip().splitlines()[-1 if not warned_count(done.stderr) else -2])
            assert report.invalidated_thinking == last["invalidated_thinking"] == warned_count(done.stderr), (
                f"{name} {strategy} at {percent}%"
            )
            # ... and on each step, the blocks after its first edit, as the CLI's step lines say.
            cli_steps = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
            cli_ran = [s["invalidated_thinking"] for s in cli_steps if s.get("outcome") == "ran"]
            py_ran = [s["invalidated_thinking"] for s in report.steps if s["outcome"] == "ran"]
            assert py_ran == cli_ran, f"{name} {strategy} at {percent}%"
            assert sum(py_ran) >= report.invalidated_thinking
            seen += report.invalidated_thinking
            if report.invalidated_thinking:
                try:
                    kept = cutpoint.compact_report(text, strategy=strategy, budget=budget)
                except cutpoint.DeferError as e:
                    assert "cannot be stripped" in str(e)
                else:
                    assert kept.invalidated_thinking == 0
                    kept_cli = subprocess.run(args + [str(path)], capture_output=True, text=True)
                    if kept_cli.returncode == 0:
                        last = [line for line in kept_cli.stderr.splitlines() if line.startswith("{")][-1]
                        assert json.loads(last)["invalidated_thinking"] == 0
                        assert json.loads(last)["simple_compaction"] == kept.simple_compaction
    # A summary at a target too.
    target = max(1, live * 60 // 100)
    done = subprocess.run(
        [str(cli()), "compact", "--target", str(target), "--allow-invalidated-thinking", str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    report = cutpoint.compact_report(text, strategy="summarize", target=target, keep_thinking_valid=False)
    assert report.invalidated_thinking == warned_count(done.stderr)
    seen += report.invalidated_thinking
    # And by default, the same bytes as the CLI's default, nothing invalid.
    default = subprocess.run([str(cli()), "compact", "--target", str(target), str(path)], capture_output=True)
    kept = cutpoint.compact_report(text, strategy="summarize", target=target)
    assert kept.invalidated_thinking == 0 and warned_count(default.stderr.decode()) == 0
    assert kept.messages.encode() == default.stdout, f"{name}: Python and the CLI differ at the target"
    assert seen > 0, f"{name}: no output invalidated thinking (the test cannot fail)"


@pytest.mark.parametrize(
    "text",
    [
        '{"kind":"user","tokens":3}\nnot json\n',
        '{"kind":"user","tokens":3}\n{"x":1}\n',
        '{"kind":"user","tokens":3}\n{"kind":"bogus","tokens":1}\n',
        '{"foo":1}\n{"bar":2}\n',
        '[{"role":"user","content":"hi"}',
    ],
)
def test_auto_judges_an_input_as_the_cli_does(text: str) -> None:
    """`format="auto"` is the CLI's detection (`format::detect_input`): input that may
    be records JSONL is read as records, whose reader names the bad line; anything
    else gets the same "cannot tell the format" answer."""
    done = subprocess.run([str(cli()), "check", "-"], input=text.encode(), capture_output=True)
    assert done.returncode == 2, done.stderr
    cli_says = done.stderr.decode().removeprefix("<stdin>").lstrip(":").strip()
    with pytest.raises(cutpoint.FormatError) as raised:
        cutpoint.check(text)
    python_says = str(raised.value)
    # The same fault: the line number and the reader's words (the CLI names the file,
    # Python the "line"; each names the flag its own way).
    head = cli_says.split(";")[0].split(" (")[0]
    if head[:1].isdigit():
        line, words = head.split(": ", 1)
        assert python_says.startswith(f"line {line}: {words}"), (cli_says, python_says)
    else:
        assert python_says.split(";")[0].split(" (")[0] == head, (cli_says, python_says)
