"""compact() never breaks pairing: every output is re-checked with check(), in all
four shapes, on generated and real logs, and its accounting (what was summarized,
what was kept, tokens) is checked against the input."""

from __future__ import annotations

import json
import random
from typing import Any, Dict, List

import pytest

import cutpoint
from cutpoint import DeferError

from logs import SHAPES, TRANSCRIPTS, call_ids, conversation, render
from test_check import CLAUDE_CODE, SWE_AGENT, anthropic_messages, chat_history, responses_items

HOLDER = {"openai-chat": "messages", "anthropic": "messages", "openai-responses": "input", "gemini": "contents"}


def assert_faithful(messages: List[Dict[str, Any]], shape: str, report: cutpoint.Compaction) -> None:
    """What every compaction of a clean list must satisfy."""
    out = report.messages
    assert cutpoint.check(out, format=shape) == [], "compaction broke a provider rule"
    assert report.tokens_before == cutpoint.count_tokens(messages, shape)
    assert report.tokens_after == cutpoint.count_tokens(out, shape)
    if not report.changed:
        assert out == messages and out is not messages
        assert all(a is b for a, b in zip(out, messages))
        return
    if report.simple_compaction:
        # keep_thinking_valid wrote a simple compaction: the whole history in one
        # summary, every call of the input named in it.
        assert report.head is None and report.cut is None and report.invalidated_thinking == 0
        text = json.dumps(out, ensure_ascii=False)
        for call_id in call_ids(messages, shape):
            assert json.dumps(call_id)[1:-1] in text, f"call {call_id} is lost"
        return
    head, cut = report.head, report.cut
    assert head <= cut <= len(messages)
    assert cut in cutpoint.legal_cuts(messages, shape)
    # The pinned head and the retained messages are the input's own objects (equal,
    # but for thinking keep_thinking_valid stripped, when it did: read back whole).
    assert len(out) == head + 1 + len(messages) - cut
    if not report.thinking_stripped:
        assert all(a is b for a, b in zip(out[:head], messages[:head]))
        assert all(a is b for a, b in zip(out[head + 1 :], messages[cut:]))
    else:
        assert report.invalidated_thinking == 0
        assert out[:head] == messages[:head]
        for a, b in zip(out[head + 1 :], messages[cut:]):
            unthought = [x for x in b["content"] if x.get("type") != "thinking"] if isinstance(b.get("content"), list) else b.get("content")
            assert a == b or a.get("content") == unthought
    # The summary covers exactly the calls of the summarized messages, in call order,
    # with their arguments verbatim.
    summarized = call_ids(messages[head:cut], shape)
    if shape != "gemini":
        assert [u.call_id for u in report.ledger] == summarized
    else:
        assert len(report.ledger) == len(summarized)
    text = json.dumps(report.summary, ensure_ascii=False)
    for unit in report.ledger:
        assert json.dumps(unit.call_id)[1:-1] in text
    assert out[head] == report.summary
    # The same result through the dict path, which parses the whole rewritten text.
    body = cutpoint.compact(
        {HOLDER[shape]: messages, "model": "m"},
        budget=report.budget,
        format=shape,
        keep_head=report_keep_head(report),
    )
    assert body[HOLDER[shape]] == out and body["model"] == "m"


_KEEP_HEAD: Dict[int, int] = {}


def report_keep_head(report: cutpoint.Compaction) -> int:
    return _KEEP_HEAD[id(report)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", range(25))
def test_compaction_to_a_budget_keeps_every_pair(shape: str, seed: int) -> None:
    rng = random.Random(seed)
    turns = conversation(rng, rng.randint(1, 8), max_parallel=rng.choice([1, 4]))
    messages = render(turns, shape, gemini_ids=seed % 3 != 0)
    total = cutpoint.count_tokens(messages, shape)
    for budget in sorted({0, rng.randint(0, total), total // 2, total - 1, total}):
        keep_head = rng.choice([0, 0, 1, 2])
        report = cutpoint.compact_report(messages, budget=budget, format=shape, keep_head=keep_head)
        _KEEP_HEAD[id(report)] = keep_head
        assert_faithful(messages, shape, report)
        assert report.budget == budget
        if budget >= total:
            assert not report.changed
        # The budget is met unless everything legal is already compacted.
        assert report.met_budget or report.cut == len(messages) or not report.changed


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", range(10))
def test_a_turn_in_flight_defers_or_keeps_its_calls(shape: str, seed: int) -> None:
    rng = random.Random(100 + seed)
    turns = conversation(rng, rng.randint(1, 5), pending_at_end=True)
    messages = render(turns, shape)
    running = {c.id for c in turns[-1].calls}
    total = cutpoint.count_tokens(messages, shape)
    for budget in (0, total // 3, total // 2):
        try:
            report = cutpoint.compact_report(messages, budget=budget, format=shape)
        except DeferError as e:
            assert e.reason == "no_legal_cut"
            assert set(e.waiting_on) <= running
            continue
        found = cutpoint.check(report.messages, format=shape)
        # Only the calls still running are unanswered, and they are kept.
        assert found and all(v.pending_at_end for v in found)
        assert set(call_ids(report.messages, shape)) >= running


@pytest.mark.parametrize("shape", SHAPES)
def test_compaction_to_a_target_walks_back_to_a_legal_cut(shape: str) -> None:
    messages = render(conversation(random.Random(3), 6), shape)
    legal = cutpoint.legal_cuts(messages, shape)
    total = cutpoint.count_tokens(messages, shape)
    for target in range(0, total, max(1, total // 25)):
        try:
            report = cutpoint.compact_report(messages, target=target, lookback=total, format=shape)
        except DeferError:
            pytest.fail("with a lookback of the whole log a legal cut always exists")
        if report.changed:
            assert report.cut in legal
            assert cutpoint.check(report.messages, format=shape) == []
            # Walking back compacts at most what was asked.
            assert report.summarized_tokens <= target


def test_a_short_lookback_defers_and_names_the_window() -> None:
    # One call whose result is huge: a target inside the pair cannot walk back far.
    messages = [
        {"role": "user", "content": "x" * 400},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "y" * 4000},
        {"role": "user", "content": "z" * 40},
    ]
    with pytest.raises(DeferError) as e:
        cutpoint.compact(messages, target=600, lookback=10, format="openai-chat")
    assert (e.value.floor, e.value.target_index, e.value.nearest_legal_below) == (2, 2, 1)
    assert e.value.nearest_legal_above == 3 and e.value.waiting_on == []


def records_log(rng: random.Random, turns: int) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for t in conversation(rng, turns):
        if t.kind in ("system", "user"):
            out.append({"kind": "user", "tokens": len(t.text)})
        elif t.kind == "assistant":
            if t.text:
                out.append({"kind": "assistant", "tokens": len(t.text)})
            for c in t.calls:
                out.append({"kind": "tool_use", "call_id": c.id, "tokens": 20, "name": c.name,
                            "arguments": c.args, "bound": bool(t.text) or c is not t.calls[0]})
        else:
            for c in t.calls:
                out.append({"kind": "tool_result", "call_id": c.id, "tokens": len(c.output),
                            "content": c.output})
    return out


@pytest.mark.parametrize("seed", range(15))
def test_records_compaction_plans_and_applies_on_a_log(seed: int) -> None:
    rng = random.Random(seed)
    records = records_log(rng, rng.randint(1, 8))
    total = sum(r["tokens"] for r in records)
    for budget in (0, total // 3, total // 2, total):
        report = cutpoint.compact_report(records, budget=budget, keep_head=1)
        out = report.messages
        assert cutpoint.check(out, format="records") == []
        assert report.tokens_after == sum(r["tokens"] for r in out)
        if not report.changed:
            assert budget >= total or report.head == report.cut
            continue
        summary = out[report.head]
        assert summary["kind"] == "summary" and summary == report.summary
        covered = [c["call_id"] for c in summary.get("covers", [])]
        assert covered == [r["call_id"] for r in records[report.head:report.cut] if r["kind"] == "tool_use"]
        assert [u.call_id for u in report.ledger] == covered
        assert all(c.get("arguments") is not None for c in summary.get("covers", []))
        assert report.met_budget or report.cut == len(records)


def test_real_transcripts_compact_without_breaking_a_rule() -> None:
    logs = [
        ("openai-chat", chat_history(SWE_AGENT)),
        ("openai-responses", responses_items("codex__localpush__rollout-12-41-04-parallel7.jsonl")),
    ] + [("anthropic", anthropic_messages(name)) for name in CLAUDE_CODE]
    for shape, messages in logs:
        total = cutpoint.count_tokens(messages, shape)
        for budget in (total // 4, total // 2, 3 * total // 4):
            report = cutpoint.compact_report(messages, budget=budget, format=shape, keep_head=1)
            _KEEP_HEAD[id(report)] = 1
            assert_faithful(messages, shape, report)
            assert report.changed


def test_log_files_compact_in_their_own_format() -> None:
    name = "codex__localpush__rollout-12-41-04-parallel7.jsonl"
    text = (TRANSCRIPTS / name).read_text(encoding="utf-8")
    total = cutpoint.count_tokens(text, "codex")
    out = cutpoint.compact(text, budget=total // 2, format="codex")
    assert isinstance(out, str)
    assert cutpoint.check(out, format="codex") == []
    assert cutpoint.count_tokens(out, "codex") <= total // 2


def test_option_errors() -> None:
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(ValueError, match='unknown strategy "squash"'):
        cutpoint.compact(msgs, strategy="squash", budget=1, format="openai-chat")
    with pytest.raises(TypeError, match='no option "keep_turns"'):
        cutpoint.compact(msgs, budget=1, format="openai-chat", keep_turns=2)
    with pytest.raises(TypeError, match="needs budget="):
        cutpoint.compact(msgs, format="openai-chat")
    with pytest.raises(TypeError, match="not both"):
        cutpoint.compact(msgs, budget=1, target=1, format="openai-chat")
    with pytest.raises(ValueError, match="direction"):
        cutpoint.compact(msgs, budget=1, format="openai-chat", direction="sideways")


def test_a_python_token_counter_is_used_and_its_errors_surface() -> None:
    messages = render(conversation(random.Random(5), 4), "openai-chat")
    calls: List[str] = []

    def chars(text: str) -> int:
        calls.append(text)
        return len(text)

    total = cutpoint.count_tokens(messages, "openai-chat", chars)
    assert calls and total == sum(len(t) for t in calls)
    report = cutpoint.compact_report(messages, budget=total // 2, format="openai-chat", token_counter=chars)
    assert report.tokens_before == total and report.met_budget
    assert report.tokens_after == cutpoint.count_tokens(report.messages, "openai-chat", chars)

    def broken(text: str) -> int:
        raise KeyError("tokenizer down")

    with pytest.raises(KeyError, match="tokenizer down"):
        cutpoint.compact(messages, budget=10, format="openai-chat", token_counter=broken)
    with pytest.raises((TypeError, OverflowError)):
        cutpoint.count_tokens(messages, "openai-chat", lambda text: -1)


JSON_LINES_FIXTURES = sorted(
    p.name for p in TRANSCRIPTS.iterdir() if p.name.startswith(("claude-code__", "codex__"))
)


def test_a_json_lines_summary_is_the_summary_record_alone() -> None:
    """``Compaction.summary`` of a JSON lines transcript is the summary's own record,
    even where the reader merges the first retained record into the summary's message
    (a Claude Code user record after it): it used to come back as two lines, which
    ``compact_report`` could not parse (coverage-test-fix at a budget of 1881)."""
    summaries = 0
    for name in JSON_LINES_FIXTURES:
        text = (TRANSCRIPTS / name).read_text()
        live = cutpoint.count_tokens(text)
        budgets = [max(1, live * share // 100) for share in (30, 45, 55, 60, 70, 85)]
        if name == "claude-code__claude-reliability__coverage-test-fix.jsonl":
            budgets.append(1881)
        for budget in budgets:
            try:
                report = cutpoint.compact_report(text, strategy="summarize", budget=budget)
            except cutpoint.DeferError:
                continue
            if report.summary is None:
                continue
            summaries += 1
            assert isinstance(report.summary, dict), (name, budget)
            said = json.dumps(report.summary)
            assert "Earlier conversation, compacted." in said, (name, budget, said[:300])
            # The summary is one line of the output, written there verbatim.
            assert any(json.loads(l) == report.summary for l in report.messages.splitlines() if l.strip()), (
                name, budget)
    assert summaries >= 20, summaries
