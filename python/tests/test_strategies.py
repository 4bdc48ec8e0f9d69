"""compact() with every strategy the library has (clear, clear-thinking, digest, slide,
truncate, pipeline): on generated logs in the four JSON shapes and as records, and on
the repository's real transcripts in their own formats. Every output is re-checked
with check() (no new violation), every call id of the input is still in the output
(kept, or listed in a ledger) or named in a truncate step's ``dropped_calls``, the
token accounting agrees with count_tokens(), and each strategy's own promise (what
clear clears, what a preset runs, ...) is checked against the input."""

from __future__ import annotations

import json
import random
from typing import Any, Dict, List, Set, Tuple

import pytest

import cutpoint

from logs import SHAPES, TRANSCRIPTS, call_ids, conversation, render
from test_check import anthropic_messages, chat_history, responses_items, text_of

#: The strategies that run as pipelines (summarize has its own tests).
EDITING = ["clear", "clear-thinking", "digest", "slide", "truncate", "pipeline"]

#: The fields of the CLI's `--report` line for a stage that ran.
RAN_FIELDS = {
    "strategy", "outcome", "tokens_before", "tokens_after", "records_before", "records_after",
    "cleared_results", "cleared_inputs", "cleared_thinking", "invalidated_thinking", "summaries", "summarized_calls",
    "dropped_turns", "dropped_calls", "met_target", "left_alone",
}
#: ... and for one that could not make progress.
NO_PROGRESS_FIELDS = {"strategy", "outcome", "reason", "detail", "tokens", "left_alone"}

PLACEHOLDER = "[tool result cleared to save context]"

PRESET_STAGES = {
    "gentle": ["clear-thinking", "clear", "digest"],
    "balanced": ["clear-thinking", "clear", "digest", "summarize"],
    "aggressive": ["clear-thinking", "clear", "digest", "summarize", "slide", "truncate"],
}


def dropped(report: cutpoint.Compaction) -> Set[str]:
    """The call ids the steps say were dropped without a trace; only truncate drops."""
    out: Set[str] = set()
    for step in report.steps:
        if step.get("dropped_calls"):
            assert step["strategy"] == "truncate", step
            out |= set(step["dropped_calls"])
    return out


def text_of_log(log: Any) -> str:
    return log if isinstance(log, str) else json.dumps(log, ensure_ascii=False)


def assert_calls_accounted(ids: List[str], out: Any, report: cutpoint.Compaction) -> None:
    """Every call id of the input is in the output (its call, or a ledger line
    naming it) or in a truncate step's dropped_calls, and nothing dropped is still
    there."""
    text = text_of_log(out)
    gone = dropped(report)
    for call_id in ids:
        present = json.dumps(call_id)[1:-1] in text or call_id in text
        assert present or call_id in gone, f"call {call_id} vanished without being named"
    assert gone <= set(ids), "dropped_calls names calls the input does not have"


def assert_steps(strategy: str, report: cutpoint.Compaction) -> None:
    """The steps have the CLI's report fields; one step per stage."""
    for step in report.steps:
        if step["outcome"] == "ran":
            assert set(step) == RAN_FIELDS
            assert step["tokens_after"] <= step["tokens_before"]
        elif step["outcome"] == "no-progress":
            assert set(step) == NO_PROGRESS_FIELDS
        else:
            assert step["outcome"] in ("not-triggered", "stalled") and set(step) == {"strategy", "outcome"}
    names = [s["strategy"] for s in report.steps]
    if report.simple_compaction:
        # keep_thinking_valid (the default) wrote a simple compaction instead of what
        # the stages made: its one summary is the report.
        assert names == ["summarize"] and report.changed and report.invalidated_thinking == 0
    elif strategy != "pipeline":
        # One step per round: more than one round only when the output read back
        # over the budget and the previous round changed something; then, with
        # keep_thinking_valid, a clear-thinking step when it stripped thinking the
        # rounds invalidated.
        assert names[: report.rounds] == [strategy] * report.rounds
        assert names[report.rounds :] in ([], ["clear-thinking"]), names
        # 0 rounds: the log met its budget before the run and comes back as it was.
        assert 0 <= report.rounds <= 3
        if report.rounds == 0:
            assert report.steps == [] and not report.changed and report.met_budget
        assert all(s["outcome"] == "ran" for s in report.steps[: report.rounds - 1])
    assert report.head is None and report.cut is None and report.ledger == [] and report.summary is None
    ran = [s for s in report.steps if s["outcome"] == "ran"]
    if report.changed:
        assert ran, "a change no step reports"


def assert_compacted(messages: Any, fmt: str, strategy: str, report: cutpoint.Compaction,
                     budget: Any, before: List[Tuple[str, Any]], ids: List[str]) -> None:
    out = report.messages
    after = [(v.rule, v.call_id) for v in cutpoint.check(out, format=fmt)]
    assert set(after) <= set(before), f"{strategy} broke a provider rule: {set(after) - set(before)}"
    assert report.tokens_before == cutpoint.count_tokens(messages, fmt)
    assert report.tokens_after == cutpoint.count_tokens(out, fmt)
    assert report.met_budget == (budget is None or report.tokens_after <= budget)
    assert report.budget == budget
    assert_steps(strategy, report)
    assert_calls_accounted(ids, out, report)
    if not report.changed:
        assert out == messages
    else:
        assert out != messages


@pytest.mark.parametrize("strategy", EDITING)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", range(6))
def test_every_strategy_on_every_shape_keeps_pairs_and_names_every_call(
    strategy: str, shape: str, seed: int
) -> None:
    rng = random.Random(seed)
    messages = render(conversation(rng, rng.randint(2, 7), max_parallel=rng.choice([1, 4])), shape)
    ids = call_ids(messages, shape)
    total = cutpoint.count_tokens(messages, shape)
    budgets = [total // 3, total // 2, total] + ([None] if strategy != "pipeline" else [])
    for budget in budgets:
        keep_head = rng.choice([0, 1, 2])
        report = cutpoint.compact_report(
            messages, strategy=strategy, budget=budget, format=shape, keep_head=keep_head
        )
        assert_compacted(messages, shape, strategy, report, budget, [], ids)
        if budget is not None and budget >= total and strategy != "pipeline":
            # One strategy fires above its budget only (a preset's gentle stages
            # fire above half of it).
            assert not report.changed
        if report.changed and keep_head:
            # The pinned head is never touched.
            assert report.messages[:keep_head] == messages[:keep_head]
        # A request body compacts to the same messages.
        holder = {"openai-chat": "messages", "anthropic": "messages",
                  "openai-responses": "input", "gemini": "contents"}[shape]
        body = cutpoint.compact(
            {holder: messages, "model": "m"}, strategy=strategy, budget=budget, format=shape,
            keep_head=keep_head,
        )
        assert body[holder] == report.messages and body["model"] == "m"


def records_of(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """An OpenAI Chat log as cutpoint record dicts (one per message or call)."""
    out: List[Dict[str, Any]] = []
    for m in messages:
        tokens = max(1, len(json.dumps(m)) // 4)
        if m["role"] == "tool":
            out.append({"kind": "tool_result", "tokens": tokens, "call_id": m["tool_call_id"]})
        elif m.get("tool_calls"):
            out.append({"kind": "assistant", "tokens": tokens})
            out += [{"kind": "tool_use", "tokens": 5, "call_id": c["id"]} for c in m["tool_calls"]]
        else:
            out.append({"kind": "user" if m["role"] in ("user", "system") else "assistant", "tokens": tokens})
    return out


@pytest.mark.parametrize("strategy", EDITING)
@pytest.mark.parametrize("seed", range(4))
def test_every_strategy_on_records(strategy: str, seed: int) -> None:
    rng = random.Random(100 + seed)
    records = records_of(render(conversation(rng, rng.randint(2, 6)), "openai-chat"))
    ids = [r["call_id"] for r in records if r["kind"] == "tool_use"]
    total = sum(r["tokens"] for r in records)
    for budget in (total // 3, total // 2, total):
        report = cutpoint.compact_report(records, strategy=strategy, budget=budget, keep_head=1)
        assert_compacted(records, "records", strategy, report, budget, [], ids)
        assert report.tokens_after == sum(r["tokens"] for r in report.messages)
        assert report.messages[0] == records[0]


TRANSCRIPT_FILES = sorted(
    p.name for p in TRANSCRIPTS.iterdir()
    if p.name != "SOURCES.md" and not p.name.startswith(("chat-wrapper__", "openhands__"))
)


def transcript_ids(name: str, fmt: str) -> List[str]:
    """The call ids of a transcript file, read from its own structure (independently
    of cutpoint's readers)."""
    if fmt == "claude-code":
        # Every record, not only the live history: an id may only be named again.
        ids = []
        for line in text_of(name).splitlines():
            content = json.loads(line).get("message", {}).get("content")
            if isinstance(content, list):
                ids += [b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        return ids
    if fmt == "codex":
        return [i["call_id"] for i in responses_items(name) if i.get("type", "").endswith("_call") and "call_id" in i]
    if fmt == "gemini-cli":
        return [c["id"] for m in json.loads(text_of(name))["messages"] for c in m.get("toolCalls") or []]
    doc = json.loads(text_of(name))
    if isinstance(doc, dict):
        doc = doc.get("history") or doc["messages"]
    return call_ids(doc, "openai-chat")


@pytest.mark.parametrize("name", TRANSCRIPT_FILES)
def test_every_strategy_on_real_transcripts_in_their_own_format(name: str) -> None:
    text = text_of(name)
    fmt = cutpoint.detect(text)
    before = [(v.rule, v.call_id) for v in cutpoint.check(text, format=fmt)]
    ids = transcript_ids(name, fmt)
    total = cutpoint.count_tokens(text, fmt)
    changed = 0
    refused = 0
    for strategy in EDITING:
        for budget, keep_head in ((total // 4, 0), (total // 2, 1)):
            try:
                report = cutpoint.compact_report(
                    text, strategy=strategy, budget=budget, format=fmt, keep_head=keep_head
                )
            except cutpoint.DeferError as e:
                # keep_thinking_valid: the edits change the prefix of the current
                # turn's thinking, and a call in flight keeps that turn (no simple
                # compaction): the CLI's exit 3. Only where a call is in flight.
                assert e.reason == "thinking_bound", e
                assert any(v.pending_at_end for v in cutpoint.check(text, format=fmt)), e
                refused += 1
                continue
            assert isinstance(report.messages, str)
            assert_compacted(text, fmt, strategy, report, budget, before, ids)
            changed += report.changed
    # A session whose current turn has a call in flight defers every rewrite that
    # would change its thinking's prefix; every other one is compacted.
    assert changed > 0 or refused == 2 * len(EDITING), "no strategy did anything on a real transcript"


REAL_SHAPES = [
    ("openai-chat", lambda: chat_history("chat__swe-agent__marshmallow-1867-function_calling_replace.traj")),
    ("openai-chat", lambda: json.loads(text_of("openai-chat__tau-bench__gpt-4o-airline-traj173.json"))["messages"]),
    ("openai-responses", lambda: responses_items("codex__localpush__rollout-12-41-04-parallel7.jsonl")),
    ("anthropic", lambda: anthropic_messages("claude-code__spotter__4d5611e5-main.jsonl")),
    ("anthropic", lambda: anthropic_messages("claude-code__claude-reliability__python-to-rust-port.jsonl")),
]


@pytest.mark.parametrize("index", range(len(REAL_SHAPES)))
def test_every_strategy_on_real_logs_as_dicts(index: int) -> None:
    shape, load = REAL_SHAPES[index]
    messages = load()
    before = [(v.rule, v.call_id) for v in cutpoint.check(messages, format=shape)]
    ids = call_ids(messages, shape)
    total = cutpoint.count_tokens(messages, shape)
    for strategy in EDITING:
        report = cutpoint.compact_report(messages, strategy=strategy, budget=total // 2, format=shape, keep_head=1)
        assert_compacted(messages, shape, strategy, report, total // 2, before, ids)


def chat_log(seed: int = 7, turns: int = 5) -> List[Dict[str, Any]]:
    return render(conversation(random.Random(seed), turns, max_parallel=3), "openai-chat")


def results(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [m for m in messages if m["role"] == "tool"]


def test_clear_keeps_the_last_tool_uses_and_clears_the_rest() -> None:
    messages = chat_log()
    n = len(results(messages))
    assert n > 5
    for keep in (0, 2, 5):
        report = cutpoint.compact_report(messages, strategy="clear", format="openai-chat", keep_tool_uses=keep)
        out = report.messages
        assert len(out) == len(messages)
        # Results of all but the last `keep` calls became the placeholder, unless the
        # placeholder would count no fewer tokens as written (a result shorter than
        # it is left alone: clearing it would grow the log); the rest are as they were.
        order = call_ids(messages, "openai-chat")
        kept = set(order[len(order) - keep:]) if keep else set()
        cleared = 0
        for old, new in zip(results(messages), results(out)):
            shorter = len(json.dumps(old["content"])) <= len(json.dumps(PLACEHOLDER))
            longer = len(json.dumps(old["content"])) >= len(json.dumps(PLACEHOLDER)) + 4
            if old["tool_call_id"] in kept or shorter:
                assert new == old
            elif longer:
                assert new["content"] == PLACEHOLDER and new["tool_call_id"] == old["tool_call_id"]
            cleared += new["content"] == PLACEHOLDER
        assert cleared > 0 or len(kept) == len(order)
        (step,) = report.steps
        assert step["cleared_results"] == cleared
        not_smaller = step["left_alone"].get("not-smaller", 0)
        assert cleared + not_smaller == len(order) - len(kept)
        assert step["left_alone"].get("kept-recent", 0) == len(kept)


def test_clear_options_exclude_tools_and_clear_inputs() -> None:
    messages = chat_log(8, 6)
    tools = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}
    assert len(set(tools.values())) > 1
    spared = sorted(set(tools.values()))[0]
    report = cutpoint.compact_report(
        messages, strategy="clear", format="openai-chat", keep_tool_uses=0,
        exclude_tools=[spared], clear_tool_inputs=True,
    )
    out = report.messages
    for old, new in zip(results(messages), results(out)):
        if tools[old["tool_call_id"]] == spared:
            assert new == old
        else:
            assert new["content"] == PLACEHOLDER
    for m in out:
        for c in m.get("tool_calls") or []:
            if tools[c["id"]] != spared:
                assert json.loads(c["function"]["arguments"]) == {}
    (step,) = report.steps
    assert step["cleared_inputs"] == sum(1 for t in tools.values() if t != spared)
    assert step["left_alone"]["excluded-tool"] == sum(1 for t in tools.values() if t == spared)
    # Inputs of only the tools listed.
    other = sorted(set(tools.values()))[-1]
    out = cutpoint.compact(messages, strategy="clear", format="openai-chat", keep_tool_uses=0,
                           clear_tool_inputs=[other])
    originals = {c["id"]: c for m in messages for c in m.get("tool_calls") or []}
    for m in out:
        for c in m.get("tool_calls") or []:
            if tools[c["id"]] == other:
                assert json.loads(c["function"]["arguments"]) == {}
            else:
                assert c == originals[c["id"]]


def test_clear_at_least_clears_all_or_nothing() -> None:
    messages = chat_log()
    full = cutpoint.compact_report(messages, strategy="clear", format="openai-chat", keep_tool_uses=0)
    reclaimable = full.steps[0]["tokens_before"] - full.steps[0]["tokens_after"]
    assert reclaimable > 0
    refused = cutpoint.compact_report(
        messages, strategy="clear", format="openai-chat", keep_tool_uses=0, clear_at_least=10 * reclaimable + 1000
    )
    assert not refused.changed and refused.messages == messages
    (step,) = refused.steps
    assert step["outcome"] == "no-progress" and step["reason"] == "below-clear-at-least"


def test_truncate_names_exactly_the_calls_it_drops() -> None:
    messages = chat_log(9, 6)
    total = cutpoint.count_tokens(messages, "openai-chat")
    report = cutpoint.compact_report(messages, strategy="truncate", format="openai-chat", budget=total // 3, keep_head=1)
    assert report.changed and report.met_budget
    left = set(call_ids(report.messages, "openai-chat"))
    assert set(report.steps[0]["dropped_calls"]) == set(call_ids(messages, "openai-chat")) - left
    assert report.steps[0]["dropped_calls"]
    # What is left is a suffix of the input after the pinned head.
    out = report.messages
    assert out[0] == messages[0] and out[1:] == messages[len(messages) - len(out) + 1:]


def test_slide_keeps_the_last_turns_and_keep_turns_is_a_floor() -> None:
    messages = chat_log(10, 6)
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    for keep_turns in (1, 3):
        report = cutpoint.compact_report(messages, strategy="slide", format="openai-chat", keep_turns=keep_turns)
        assert report.changed
        tail = messages[users[-keep_turns]:]
        assert report.messages[-len(tail):] == tail
        (step,) = report.steps
        assert step["dropped_turns"] >= 1 and step["summaries"] == 1


def test_digest_replaces_tool_groups_by_ledgers() -> None:
    messages = chat_log(11, 4)
    report = cutpoint.compact_report(messages, strategy="digest", format="openai-chat")
    assert report.changed
    (step,) = report.steps
    assert step["summaries"] >= 1 and step["summarized_calls"] >= step["summaries"]
    left = set(call_ids(report.messages, "openai-chat"))
    digested = [i for i in call_ids(messages, "openai-chat") if i not in left]
    assert len(digested) == step["summarized_calls"]
    text = json.dumps(report.messages)
    assert all(i in text for i in digested)


def test_clear_thinking_drops_old_thinking_only() -> None:
    messages = render(conversation(random.Random(12), 4), "anthropic")
    thought = 0
    for m in messages:
        if m["role"] == "assistant" and isinstance(m["content"], list):
            m["content"].insert(0, {"type": "thinking", "thinking": "let me think " * 20, "signature": "sig"})
            thought += 1
    report = cutpoint.compact_report(messages, strategy="clear-thinking", format="anthropic")
    assert report.changed
    (step,) = report.steps
    left = sum(1 for m in report.messages if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "thinking")
    assert step["cleared_thinking"] == thought - left > 0
    assert cutpoint.check(report.messages, format="anthropic") == []


@pytest.mark.parametrize("preset", sorted(PRESET_STAGES))
def test_pipeline_runs_the_preset_stages_in_order(preset: str) -> None:
    messages = chat_log(13, 7)
    total = cutpoint.count_tokens(messages, "openai-chat")
    report = cutpoint.compact_report(messages, strategy="pipeline", preset=preset, budget=total // 3,
                                     format="openai-chat", summary="What happened so far.")
    assert [s["strategy"] for s in report.steps] == PRESET_STAGES[preset] * report.rounds
    assert report.changed
    if preset == "balanced" and report.steps[-1]["outcome"] == "ran" and report.steps[-1]["summaries"]:
        # The summary is the last stage's output: its prose is the summary option.
        assert "What happened so far." in json.dumps(report.messages)
    # The window less the output is the budget.
    same = cutpoint.compact_report(messages, strategy="pipeline", preset=preset, format="openai-chat",
                                   summary="What happened so far.",
                                   context_window=total // 3 + 1000, max_output=1000)
    assert same.budget == total // 3 and same.messages == report.messages


def test_a_python_token_counter_counts_for_the_strategies() -> None:
    messages = chat_log(14, 5)
    seen: List[str] = []

    def chars(text: str) -> int:
        seen.append(text)
        return len(text)

    total = cutpoint.count_tokens(messages, "openai-chat", chars)
    for strategy in EDITING:
        seen.clear()
        report = cutpoint.compact_report(messages, strategy=strategy, budget=total // 2,
                                         format="openai-chat", token_counter=chars)
        assert seen
        assert report.tokens_before == total
        assert report.tokens_after == cutpoint.count_tokens(report.messages, "openai-chat", chars)
        assert report.met_budget == (report.tokens_after <= total // 2)

    def broken(text: str) -> int:
        raise KeyError("tokenizer down")

    with pytest.raises(KeyError, match="tokenizer down"):
        cutpoint.compact(messages, strategy="clear", format="openai-chat", token_counter=broken)


def test_pending_calls_are_a_step_not_an_error() -> None:
    messages = render(conversation(random.Random(15), 1, pending_at_end=True, system=False), "openai-chat")
    report = cutpoint.compact_report(messages, strategy="truncate", format="openai-chat", budget=0)
    assert not report.changed and not report.met_budget and report.messages == messages
    (step,) = report.steps
    assert step["outcome"] == "no-progress"
    assert step["reason"] in ("pending-calls", "nothing-eligible", "floors")


def test_option_errors_name_what_the_strategy_takes() -> None:
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(TypeError, match=r'strategy "digest" takes no option "keep_tool_uses"; it takes: budget, keep_head, keep_turns, context_window, max_output, keep_thinking_valid, calibrated$'):
        cutpoint.compact(msgs, strategy="digest", format="openai-chat", keep_tool_uses=1)
    with pytest.raises(TypeError, match='"clear" takes no option "preset".*clear_tool_inputs'):
        cutpoint.compact(msgs, strategy="clear", format="openai-chat", preset="gentle")
    with pytest.raises(TypeError, match='"slide" takes no option "summary"'):
        cutpoint.compact(msgs, strategy="slide", format="openai-chat", summary="x")
    with pytest.raises(TypeError, match='"pipeline" takes no option "target"'):
        cutpoint.compact(msgs, strategy="pipeline", budget=5, format="openai-chat", target=3)
    with pytest.raises(TypeError, match='"pipeline" needs budget='):
        cutpoint.compact(msgs, strategy="pipeline", format="openai-chat")
    with pytest.raises(TypeError, match="context_window needs max_output"):
        cutpoint.compact(msgs, strategy="clear", format="openai-chat", context_window=100)
    with pytest.raises(TypeError, match="max_output needs context_window"):
        cutpoint.compact(msgs, strategy="clear", format="openai-chat", max_output=100)
    with pytest.raises(ValueError, match='unknown preset "wild"; one of: gentle, balanced, aggressive'):
        cutpoint.compact(msgs, strategy="pipeline", budget=5, format="openai-chat", preset="wild")
    with pytest.raises(ValueError, match="budget must be a non-negative integer"):
        cutpoint.compact(msgs, strategy="truncate", budget=-1, format="openai-chat")
    with pytest.raises(ValueError, match="keep_tool_uses must be a non-negative integer"):
        cutpoint.compact(msgs, strategy="clear", format="openai-chat", keep_tool_uses=-3)
    with pytest.raises(TypeError, match="keep_turns must be an int, not str"):
        cutpoint.compact(msgs, strategy="slide", format="openai-chat", keep_turns="2")
    # summarize's counts are read the same way.
    with pytest.raises(ValueError, match="budget must be a non-negative integer"):
        cutpoint.compact(msgs, strategy="summarize", budget=-1, format="openai-chat")
    with pytest.raises(TypeError, match="target must be an int, not bool"):
        cutpoint.compact(msgs, strategy="summarize", target=True, format="openai-chat")
    with pytest.raises(TypeError, match="shorten_arguments must be an int, not str"):
        cutpoint.compact(msgs, strategy="summarize", budget=5, format="openai-chat", shorten_arguments="8")
    with pytest.raises(TypeError, match="exclude_tools must be a list of tool names, not a str"):
        cutpoint.compact(msgs, strategy="clear", format="openai-chat", exclude_tools="bash")
    with pytest.raises(ValueError, match='unknown strategy "squash"; one of: clear, clear-thinking, digest, summarize, slide, truncate, pipeline'):
        cutpoint.compact(msgs, strategy="squash", format="openai-chat")
    # A refused call changes nothing.
    before = json.dumps(msgs)
    with pytest.raises(TypeError):
        cutpoint.compact(msgs, strategy="clear", format="openai-chat", keep_tool_uses=0, bogus=1)
    assert json.dumps(msgs) == before

