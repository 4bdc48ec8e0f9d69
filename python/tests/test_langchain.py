"""The LangChain adapter: conversion to OpenAI Chat dicts keeps every tool call id,
compact() on BaseMessage lists never orphans a ToolMessage and keeps the caller's
own objects, and CutpointMiddleware compacts inside a real create_agent loop.

Skipped when LangChain is not installed, unless CUTPOINT_REQUIRE_LANGCHAIN=1 (set by
scripts/test.sh, which installs it), where a missing LangChain fails the run."""

from __future__ import annotations

import os
import random
from typing import Any, List

import pytest

try:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
except ImportError:
    if os.environ.get("CUTPOINT_REQUIRE_LANGCHAIN") == "1":
        raise
    pytest.skip("LangChain is not installed", allow_module_level=True)

import cutpoint
import cutpoint.langchain as cl

from logs import conversation


def to_langchain(turns: Any) -> List[BaseMessage]:
    out: List[BaseMessage] = []
    for t in turns:
        if t.kind == "system":
            out.append(SystemMessage(t.text))
        elif t.kind == "user":
            out.append(HumanMessage(t.text))
        elif t.kind == "assistant":
            out.append(
                AIMessage(
                    content=t.text,
                    tool_calls=[{"name": c.name, "args": c.args, "id": c.id} for c in t.calls],
                )
            )
        else:
            out.extend(ToolMessage(c.output, tool_call_id=c.id, name=c.name) for c in t.calls)
    return out


def ai_call_ids(messages: List[BaseMessage]) -> List[str]:
    return [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]


def test_conversion_keeps_every_call_id_and_argument() -> None:
    messages = to_langchain(conversation(random.Random(1), 4))
    dicts = cl.to_openai_dicts(messages)
    assert len(dicts) == len(messages)
    for m, d in zip(messages, dicts):
        if isinstance(m, AIMessage) and m.tool_calls:
            import json

            assert [c["id"] for c in d["tool_calls"]] == [c["id"] for c in m.tool_calls]
            assert [json.loads(c["function"]["arguments"]) for c in d["tool_calls"]] == [
                c["args"] for c in m.tool_calls
            ]
        if isinstance(m, ToolMessage):
            assert d == {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    assert cl.check(messages) == []
    # Tuples and dicts that convert_to_messages takes work too.
    assert cl.to_openai_dicts([("user", "hi")]) == [{"role": "user", "content": "hi"}]


def test_an_orphaned_tool_message_is_found() -> None:
    messages = to_langchain(conversation(random.Random(2), 4))
    calls = [i for i, m in enumerate(messages) if isinstance(m, AIMessage) and m.tool_calls]
    i = calls[0]
    damaged = messages[:i] + messages[i + 1 :]  # the call is gone, its results stay
    orphans = [m for m in messages[i + 1 :] if isinstance(m, ToolMessage)]
    orphans = orphans[: len(messages[i].tool_calls)]
    found = cl.check(damaged)
    assert [(v.rule, v.message, v.call_id) for v in found] == [
        ("openai-chat/tool-without-tool-calls", i + k, m.tool_call_id) for k, m in enumerate(orphans)
    ]


@pytest.mark.parametrize("seed", range(20))
def test_compaction_of_messages_never_orphans_a_tool_message(seed: int) -> None:
    rng = random.Random(seed)
    messages = to_langchain(conversation(rng, rng.randint(2, 8)))
    total = cutpoint.count_tokens(cl.to_openai_dicts(messages), "openai-chat")
    for budget in (total // 5, total // 2, total):
        report = cl.compact_report(messages, budget=budget, keep_head=1)
        out = report.messages
        assert cl.check(out) == []
        if not report.changed:
            assert out == messages
            continue
        assert report.met_budget or report.cut == len(messages)
        head, cut = report.head, report.cut
        assert all(a is b for a, b in zip(out[:head], messages[:head]))
        assert all(a is b for a, b in zip(out[head + 1 :], messages[cut:]))
        summary = out[head]
        assert isinstance(summary, HumanMessage)
        meta = summary.response_metadata[cl.SUMMARY_METADATA_KEY]
        assert meta["covers"] == ai_call_ids(messages[head:cut])
        for call_id in meta["covers"]:
            assert call_id in summary.content
        assert cl.compact(messages, budget=budget, keep_head=1) == out


def test_a_call_in_flight_defers() -> None:
    messages = to_langchain(conversation(random.Random(3), 1, pending_at_end=True, system=False))
    with pytest.raises(cutpoint.DeferError) as e:
        cl.compact(messages, budget=0, lookback=0)
    assert e.value.reason == "no_legal_cut"


class ScriptedModel(BaseChatModel):
    """A chat model that calls `fetch` `rounds` times (with parallel calls), then
    answers; it records every message list it was given."""

    rounds: int = 6
    seen: List[List[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        step = len(self.seen)
        if step <= self.rounds:
            calls = [
                {"name": "fetch", "args": {"page": step, "part": k}, "id": f"call_{step}_{k}"}
                for k in range(1 + step % 3)
            ]
            message = AIMessage(content=f"fetching page {step}", tool_calls=calls)
        else:
            message = AIMessage(content="All pages read.")
        return ChatResult(generations=[ChatGeneration(message=message)])


@tool
def fetch(page: int, part: int) -> str:
    """Fetch one part of a page."""
    return f"page {page} part {part}: " + "lorem ipsum " * 200


def test_the_middleware_compacts_inside_create_agent() -> None:
    from langchain.agents import create_agent

    model = ScriptedModel(seen=[])
    budget = 3_000
    middleware = cl.CutpointMiddleware(budget=budget, keep_head=1, summary="Pages fetched so far.")
    agent = create_agent(model, tools=[fetch], system_prompt="Read every page.", middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("Read the pages.")]})
    assert state["messages"][-1].content == "All pages read."
    assert middleware.last is not None and middleware.last.changed
    compacted = 0
    for seen in model.seen:
        conversation_only = [m for m in seen if not isinstance(m, SystemMessage)]
        assert cl.check(conversation_only) == [], "the model never sees a split pair"
        tokens = cutpoint.count_tokens(cl.to_openai_dicts(conversation_only), "openai-chat")
        summaries = [m for m in conversation_only if cl.SUMMARY_METADATA_KEY in m.response_metadata]
        if summaries:
            compacted += 1
            assert tokens <= budget
            # The pinned first user message stays first.
            assert conversation_only[0].content == "Read the pages."
    assert compacted >= 2
    # Every call the model made is in the final history or in a summary's ledger.
    final = state["messages"]
    kept = set(ai_call_ids(final))
    covered = {
        c for m in final if cl.SUMMARY_METADATA_KEY in m.response_metadata
        for c in m.response_metadata[cl.SUMMARY_METADATA_KEY]["covers"]
    }
    made = {f"call_{s}_{k}" for s in range(1, model.rounds + 1) for k in range(1 + s % 3)}
    assert kept | covered == made
    assert cl.check(final) == []


def test_the_middleware_waits_while_a_call_runs_and_refuses_unknown_strategies() -> None:
    messages = to_langchain(conversation(random.Random(4), 3, pending_at_end=True))
    middleware = cl.CutpointMiddleware(budget=0, lookback=0)
    assert middleware.before_model({"messages": messages}, None) is None
    with pytest.raises(TypeError, match='"clear" takes no option "summary"'):
        cl.CutpointMiddleware(budget=10, strategy="clear", summary="x")
    with pytest.raises(ValueError, match="unknown preset"):
        cl.CutpointMiddleware(budget=10, strategy="pipeline", preset="wild")
    with pytest.raises(ValueError, match="unknown strategy"):
        cl.CutpointMiddleware(budget=10, strategy="squash")
    with pytest.raises(TypeError, match='no option "keep_turns"'):
        cl.CutpointMiddleware(budget=10, keep_turns=3)


@pytest.mark.parametrize("strategy", [s for s in cutpoint.STRATEGIES if s != "summarize"])
def test_every_strategy_on_langchain_messages_keeps_your_objects(strategy: str) -> None:
    messages = to_langchain(conversation(random.Random(21), 6, max_parallel=3))
    dicts = cl.to_openai_dicts(messages)
    total = cutpoint.count_tokens(dicts, "openai-chat")
    report = cl.compact_report(messages, strategy=strategy, budget=total // 2, keep_head=1)
    out = report.messages
    assert cl.check(out) == []
    # The rebuilt messages are exactly what cutpoint made of the dicts...
    expected = cutpoint.compact(dicts, strategy=strategy, budget=total // 2, format="openai-chat", keep_head=1)
    assert cl.to_openai_dicts(out) == expected
    # ... with your own objects wherever a message was kept as it was.
    by_dict = {}
    for m, d in zip(messages, dicts):
        by_dict.setdefault(repr(d), m)
    for m, d in zip(out, expected):
        if repr(d) in by_dict and not cl.SUMMARY_METADATA_KEY in (m.response_metadata or {}):
            assert any(m is o for o in messages) or m.id == by_dict[repr(d)].id
    assert report.messages[0] is messages[0]
    # Every call is kept, covered by a ledger cutpoint wrote, or named as dropped.
    kept = set(ai_call_ids(out))
    covered = {
        c for m in out if cl.SUMMARY_METADATA_KEY in (m.response_metadata or {})
        for c in m.response_metadata[cl.SUMMARY_METADATA_KEY]["covers"]
    }
    dropped = {c for s in report.steps for c in s.get("dropped_calls", [])}
    assert kept | covered | dropped == set(ai_call_ids(messages))
    assert not (kept & covered) and not (kept & dropped)
    if strategy in ("clear", "digest", "slide", "truncate", "pipeline"):
        assert report.changed


def test_clear_edits_copies_of_your_messages_in_place() -> None:
    messages = to_langchain(conversation(random.Random(22), 4, max_parallel=2))
    report = cl.compact_report(messages, strategy="clear", keep_tool_uses=1, clear_tool_inputs=True)
    out = report.messages
    assert len(out) == len(messages)
    tools = [(a, b) for a, b in zip(messages, out) if isinstance(a, ToolMessage)]
    cleared = [(a, b) for a, b in tools if b is not a]
    assert len(cleared) == len(tools) - 1 == report.steps[0]["cleared_results"]
    for a, b in cleared:
        assert b.content == "[tool result cleared to save context]"
        assert b.tool_call_id == a.tool_call_id and a.content != b.content
    # The untouched messages are your objects; the cleared calls lost their arguments.
    for a, b in zip(messages, out):
        if isinstance(a, (HumanMessage, SystemMessage)):
            assert a is b
        if isinstance(a, AIMessage) and a.tool_calls:
            assert [c["id"] for c in a.tool_calls] == [c["id"] for c in b.tool_calls]
    last = ai_call_ids(messages)[-1]
    for m in out:
        if isinstance(m, AIMessage):
            for c in m.tool_calls:
                assert (c["args"] == {}) == (c["id"] != last)


@pytest.mark.parametrize(
    "strategy,options",
    [("clear", {"keep_tool_uses": 2}), ("digest", {}), ("truncate", {}), ("pipeline", {"preset": "aggressive"})],
)
def test_the_middleware_runs_any_strategy_inside_create_agent(strategy: str, options: Any) -> None:
    from langchain.agents import create_agent

    model = ScriptedModel(seen=[])
    budget = 3_000
    middleware = cl.CutpointMiddleware(budget=budget, strategy=strategy, keep_head=1, **options)
    # Each compaction, with the index of the model call that follows it.
    reports: List[Any] = []
    compact = middleware._compact

    def spy(messages: Any) -> Any:
        update = compact(messages)
        if update is not None:
            reports.append((len(model.seen), middleware.last))
        return update

    middleware._compact = spy  # type: ignore[method-assign]
    agent = create_agent(model, tools=[fetch], system_prompt="Read every page.", middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("Read the pages.")]})
    assert state["messages"][-1].content == "All pages read."
    assert len(reports) >= 2
    assert any(r.met_budget for _, r in reports)
    for seen in model.seen:
        conversation_only = [m for m in seen if not isinstance(m, SystemMessage)]
        assert cl.check(conversation_only) == [], "the model never sees a split pair"
        assert conversation_only[0].content == "Read the pages."
    for call, report in reports:
        assert report.changed and report.strategy == strategy and report.steps
        # The model saw exactly the compacted messages, of the size reported.
        seen = [m for m in model.seen[call] if not isinstance(m, SystemMessage)]
        assert cl.to_openai_dicts(seen) == cl.to_openai_dicts(report.messages)
        tokens = cutpoint.count_tokens(cl.to_openai_dicts(seen), "openai-chat")
        assert tokens == report.tokens_after < report.tokens_before
        assert report.met_budget == (tokens <= budget)
    final = state["messages"]
    made = {f"call_{s}_{k}" for s in range(1, model.rounds + 1) for k in range(1 + s % 3)}
    covered = {
        c for m in final if cl.SUMMARY_METADATA_KEY in (m.response_metadata or {})
        for c in m.response_metadata[cl.SUMMARY_METADATA_KEY]["covers"]
    }
    dropped = {c for _, r in reports for step in r.steps for c in step.get("dropped_calls", [])}
    assert set(ai_call_ids(final)) | covered | dropped == made
    if strategy == "clear":
        assert set(ai_call_ids(final)) == made, "clear keeps every call"
        assert any(isinstance(m, ToolMessage) and m.content == "[tool result cleared to save context]" for m in final)
    if strategy == "truncate":
        assert dropped
    assert cl.check(final) == []
