"""check() on the repository's real transcripts, turned into the provider shapes
(SWE-agent's OpenAI Chat history, Codex rollout items as OpenAI Responses input,
Claude Code records merged back into Anthropic messages), and on generated logs in all
four shapes with a known defect planted."""

from __future__ import annotations

import json
import random
from typing import Any, Dict, List

import pytest

import cutpoint
from cutpoint import FormatError

from logs import SHAPES, TRANSCRIPTS, call_ids, conversation, render

SWE_AGENT = "chat__swe-agent__marshmallow-1867-function_calling_replace.traj"
CODEX_CLEAN = [
    "codex__localpush__rollout-12-41-04-parallel7.jsonl",
    "codex__localpush__rollout-12-54-34-compacted.jsonl",
]
CODEX_ORPHAN = "codex__localpush__rollout-12-47-42-orphan-call.jsonl"
CODEX_TRAILING = "codex__localpush__rollout-13-19-38-trailing-call.jsonl"
CLAUDE_CODE = [
    "claude-code__claude-reliability__coverage-test-fix.jsonl",
    "claude-code__claude-reliability__python-to-rust-port.jsonl",
    "claude-code__spotter__4d5611e5-agent-acompact-e1f845.jsonl",
    "claude-code__spotter__4d5611e5-main.jsonl",
]


def text_of(name: str) -> str:
    return (TRANSCRIPTS / name).read_text(encoding="utf-8")


def chat_history(name: str) -> List[Dict[str, Any]]:
    return json.loads(text_of(name))["history"]


def responses_items(name: str) -> List[Dict[str, Any]]:
    """The ``response_item`` payloads of a Codex rollout, in order."""
    items = []
    for line in text_of(name).splitlines():
        record = json.loads(line)
        if record.get("type") == "response_item":
            items.append(record["payload"])
    return items


def anthropic_messages(name: str) -> List[Dict[str, Any]]:
    """The live history of a Claude Code session as Anthropic messages: records after
    the last compaction boundary, consecutive records of one role merged back into
    the API message they came from (Claude Code writes one content block per record).
    A subagent's file (only sidechain records) is its own conversation."""
    main: List[Dict[str, Any]] = []
    side: List[Dict[str, Any]] = []
    for line in text_of(name).splitlines():
        record = json.loads(line)
        if record.get("type") == "system" and record.get("subtype") == "compact_boundary":
            main = []
            continue
        if record.get("type") not in ("user", "assistant") or "message" not in record:
            continue
        msg = record["message"]
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        out = side if record.get("isSidechain") else main
        if out and out[-1]["role"] == msg["role"]:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": msg["role"], "content": blocks})
    return main or side


def test_swe_agent_history_is_clean_openai_chat() -> None:
    history = chat_history(SWE_AGENT)
    assert len(history) > 20
    assert cutpoint.detect(history) == "openai-chat"
    assert cutpoint.check(history, format="openai-chat") == []
    # The same verdict from the file's own text (the reader finds `history`).
    assert cutpoint.check(text_of(SWE_AGENT), format="openai-chat") == []


@pytest.mark.parametrize("name", CODEX_CLEAN)
def test_clean_codex_rollouts_are_clean_responses_input(name: str) -> None:
    items = responses_items(name)
    assert sum(i.get("type") == "function_call" for i in items) > 50
    assert cutpoint.check(items, format="openai-responses") == []
    assert cutpoint.check({"input": items}, format="openai-responses") == []


def test_an_orphaned_call_is_found_in_responses_input() -> None:
    items = responses_items(CODEX_ORPHAN)
    found = cutpoint.check(items, format="openai-responses")
    assert [(v.rule, v.call_id, v.pending_at_end) for v in found] == [
        ("openai-responses/no-tool-output", "call_BpTazJ89W9PntRqGPwDNfwEY", False)
    ]
    v = found[0]
    assert items[v.message]["call_id"] == v.call_id
    assert "No tool output found" in v.text
    assert str(v).startswith("1: openai-responses/no-tool-output: call_BpTazJ89W9PntRqGPwDNfwEY")
    # The rollout file itself, read as Codex, gives the same verdict.
    from_text = cutpoint.check(text_of(CODEX_ORPHAN), format="codex")
    assert [(v.rule, v.call_id) for v in from_text] == [(v.rule, v.call_id)]
    assert from_text[0].line > 1


def test_a_trailing_call_is_pending_at_the_end() -> None:
    items = responses_items(CODEX_TRAILING)
    found = cutpoint.check(items, format="openai-responses")
    assert [(v.call_id, v.pending_at_end) for v in found] == [
        ("call_UtYwHmwWekzvq83m8Rb9K8jJ", True)
    ]
    assert found[0].message == max(
        i for i, item in enumerate(items) if item.get("type") == "function_call"
    )


@pytest.mark.parametrize("name", CLAUDE_CODE)
def test_claude_code_sessions_are_clean_anthropic_messages(name: str) -> None:
    messages = anthropic_messages(name)
    assert messages
    assert cutpoint.check(messages, format="anthropic") == []
    assert cutpoint.check(text_of(name), format="claude-code") == []
    # Their tool calls are all there, with their ids.
    uses = call_ids(messages, "anthropic")
    assert len(uses) == len(set(uses))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", range(15))
def test_generated_logs_are_clean_and_a_dropped_result_is_named(shape: str, seed: int) -> None:
    rng = random.Random(seed)
    turns = conversation(rng, rng.randint(2, 6))
    messages = render(turns, shape, gemini_ids=seed % 2 == 0)
    assert cutpoint.check(messages, format=shape) == []
    # Drop the answer to one call that is followed by more conversation.
    answered = [
        (i, k) for i, t in enumerate(turns) if t.kind == "results" for k in range(len(t.calls))
    ]
    if not answered:
        return
    i, k = rng.choice(answered)
    dropped = turns[i].calls[k]
    damaged = list(turns)
    damaged[i] = type(turns[i])("results", calls=[c for c in turns[i].calls if c is not dropped])
    if not damaged[i].calls:
        del damaged[i]
    found = cutpoint.check(render(damaged, shape, gemini_ids=seed % 2 == 0), format=shape)
    assert found, "a call without its result is a violation"
    if shape != "gemini" or seed % 2 == 0:
        # Gemini calls without ids get synthesized ones (`name#message.part`).
        assert dropped.id in {v.call_id for v in found}
    assert not any(v.pending_at_end for v in found)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_call_still_running_is_pending_at_end(shape: str) -> None:
    turns = conversation(random.Random(7), 3, pending_at_end=True)
    found = cutpoint.check(render(turns, shape), format=shape)
    assert found and all(v.pending_at_end for v in found)
    assert {v.call_id for v in found} <= {c.id for c in turns[-1].calls} | {None}


def test_records_logs_are_checked_for_the_five_conditions() -> None:
    # As `cutpoint check` checks them (the library's validator): a call still open at
    # the very end is pending, a result without its call an orphan.
    records = [
        {"kind": "user", "tokens": 10},
        {"kind": "tool_use", "call_id": "a", "tokens": 3},
        {"kind": "tool_result", "call_id": "b", "tokens": 3},
    ]
    assert cutpoint.detect(records) == "records"
    found = cutpoint.check(records)
    assert [(v.rule, v.call_id, v.line, v.pending_at_end) for v in found] == [
        ("pending-at-end", "a", 2, True),
        ("orphan-result", "b", 3, False),
    ]
    assert [str(v) for v in found] == ["2: pending-at-end: a", "3: orphan-result: b"]


def test_unreadable_logs_raise_format_error_with_the_line() -> None:
    with pytest.raises(FormatError) as e:
        cutpoint.check([{"role": "user", "content": "x"}, {"role": "wizard"}], format="openai-chat")
    assert e.value.line == 1 and "message 1" in e.value.detail
    assert isinstance(e.value, ValueError)
    with pytest.raises(FormatError) as e:
        cutpoint.check('{"kind":"user","tokens":1}\n{"kind":"user","tokens":-1}\n', format="records")
    assert e.value.line == 2
    with pytest.raises(FormatError) as e:
        cutpoint.detect([{"role": "user", "content": "plain text is Anthropic and Chat alike"}])
    assert e.value.line is None and "pass format=" in str(e.value)
    with pytest.raises(ValueError, match="unknown format"):
        cutpoint.check([], format="yaml")
    with pytest.raises(TypeError, match="JSON-serializable"):
        cutpoint.check([{"role": "user", "content": object()}], format="openai-chat")
