"""Generated conversations for the tests: one abstract conversation (turns with tool
calls, some in parallel, results in any order) rendered in each provider shape, and
the naive oracles the tracker is checked against (the specification's code,
transcribed from ``cutpoint::testing::reference``)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

#: The four provider shapes a list of dicts can take.
SHAPES = ("openai-chat", "anthropic", "openai-responses", "gemini")

#: The repository's real transcripts.
TRANSCRIPTS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "transcripts"


@dataclass
class Call:
    id: str
    name: str
    args: Dict[str, Any]
    output: str


@dataclass
class Turn:
    """``kind`` is ``system``, ``user``, ``assistant`` (text and/or ``calls``) or
    ``results`` (the answers to the previous assistant turn's calls, in ``calls``
    order, which may differ from the call order)."""

    kind: str
    text: str = ""
    calls: List[Call] = field(default_factory=list)


def words(rng: random.Random, lo: int, hi: int) -> str:
    vocab = ["alpha", "beta", "gamma", "delta", "pytest", "src/lib.rs", "ok", "é", "日本"]
    return " ".join(rng.choice(vocab) for _ in range(rng.randint(lo, hi)))


def conversation(
    rng: random.Random,
    user_turns: int,
    *,
    system: bool = True,
    pending_at_end: bool = False,
    max_parallel: int = 4,
    id_prefix: str = "call_",
) -> List[Turn]:
    """A conversation of ``user_turns`` user turns, each followed by 0-3 tool rounds
    (1-``max_parallel`` calls each, results shuffled) and a closing assistant text;
    with ``pending_at_end`` the last round's calls get no results."""
    turns: List[Turn] = []
    if system:
        turns.append(Turn("system", "You are a coding agent. " + words(rng, 3, 10)))
    n = 0
    for u in range(user_turns):
        turns.append(Turn("user", words(rng, 2, 60)))
        rounds = rng.randint(0, 3)
        last = u == user_turns - 1
        if last and pending_at_end:
            rounds = max(rounds, 1)
        for r in range(rounds):
            calls = []
            for _ in range(rng.randint(1, max_parallel)):
                n += 1
                name = rng.choice(["bash", "read_file", "grep"])
                calls.append(
                    Call(
                        f"{id_prefix}{n}",
                        name,
                        {"command": words(rng, 1, 6), "n": n},
                        words(rng, 1, 200),
                    )
                )
            text = words(rng, 1, 20) if rng.random() < 0.5 else ""
            turns.append(Turn("assistant", text, calls))
            if last and pending_at_end and r == rounds - 1:
                return turns
            answered = list(calls)
            rng.shuffle(answered)
            turns.append(Turn("results", calls=answered))
        turns.append(Turn("assistant", words(rng, 1, 80)))
    return turns


def render(turns: Sequence[Turn], shape: str, *, gemini_ids: bool = True) -> List[Dict[str, Any]]:
    """The conversation as a list of message dicts in ``shape``. Anthropic and Gemini
    keep their system prompt outside the messages, so it is left out there."""
    out: List[Dict[str, Any]] = []
    for t in turns:
        if shape == "openai-chat":
            if t.kind in ("system", "user"):
                out.append({"role": t.kind, "content": t.text})
            elif t.kind == "assistant":
                m: Dict[str, Any] = {"role": "assistant", "content": t.text or None}
                if t.calls:
                    m["tool_calls"] = [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.args)},
                        }
                        for c in t.calls
                    ]
                out.append(m)
            else:
                out.extend(
                    {"role": "tool", "tool_call_id": c.id, "content": c.output} for c in t.calls
                )
        elif shape == "anthropic":
            if t.kind == "user":
                out.append({"role": "user", "content": t.text})
            elif t.kind == "assistant":
                blocks: List[Dict[str, Any]] = []
                if t.text:
                    blocks.append({"type": "text", "text": t.text})
                blocks += [
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": c.args}
                    for c in t.calls
                ]
                out.append({"role": "assistant", "content": blocks})
            elif t.kind == "results":
                out.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": c.id, "content": c.output}
                            for c in t.calls
                        ],
                    }
                )
        elif shape == "openai-responses":
            if t.kind in ("system", "user"):
                out.append({"type": "message", "role": t.kind, "content": t.text})
            elif t.kind == "assistant":
                if t.text:
                    out.append(
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": t.text}],
                        }
                    )
                out.extend(
                    {
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": json.dumps(c.args),
                    }
                    for c in t.calls
                )
            else:
                out.extend(
                    {"type": "function_call_output", "call_id": c.id, "output": c.output}
                    for c in t.calls
                )
        elif shape == "gemini":
            if t.kind == "user":
                out.append({"role": "user", "parts": [{"text": t.text}]})
            elif t.kind == "assistant":
                parts: List[Dict[str, Any]] = [{"text": t.text}] if t.text else []
                for c in t.calls:
                    call: Dict[str, Any] = {"name": c.name, "args": c.args}
                    if gemini_ids:
                        call["id"] = c.id
                    parts.append({"functionCall": call})
                out.append({"role": "model", "parts": parts})
            elif t.kind == "results":
                parts = []
                for c in t.calls:
                    resp: Dict[str, Any] = {"name": c.name, "response": {"output": c.output}}
                    if gemini_ids:
                        resp["id"] = c.id
                    parts.append({"functionResponse": resp})
                out.append({"role": "user", "parts": parts})
        else:
            raise ValueError(shape)
    return out


def call_ids(messages: Sequence[Dict[str, Any]], shape: str) -> List[str]:
    """The call ids of the tool calls in ``messages`` (in order)."""
    ids: List[str] = []
    for m in messages:
        if shape == "openai-chat":
            ids += [c["id"] for c in m.get("tool_calls") or []]
        elif shape == "anthropic" and isinstance(m.get("content"), list):
            ids += [b["id"] for b in m["content"] if b.get("type") == "tool_use"]
        elif shape == "openai-responses" and m.get("type") == "function_call":
            ids.append(m["call_id"])
        elif shape == "gemini":
            ids += [p["functionCall"].get("id", "?") for p in m["parts"] if "functionCall" in p]
    return ids


# --- The specification's code, transcribed (cutpoint::testing::reference). ---

Rec = Tuple[str, int, Optional[str], bool]  # kind, tokens, call_id, bound


def pending_calls_at(records: Sequence[Rec], cut: int) -> set:
    used = {r[2] for r in records[:cut] if r[0] == "tool_use"}
    satisfied = {r[2] for r in records[:cut] if r[0] == "tool_result"}
    return used - satisfied


def orphan_results_at(records: Sequence[Rec], cut: int) -> set:
    used_after = {r[2] for r in records[cut:] if r[0] == "tool_use"}
    return {r[2] for r in records[:cut] if r[0] == "tool_result" and r[2] in used_after}


def starts_bound(records: Sequence[Rec], cut: int) -> bool:
    return 0 < cut < len(records) and records[cut][3]


def is_legal_cut(records: Sequence[Rec], cut: int) -> bool:
    return (
        not pending_calls_at(records, cut)
        and not orphan_results_at(records, cut)
        and not starts_bound(records, cut)
    )


class Deferred(Exception):
    def __init__(self, **facts: Any) -> None:
        super().__init__(facts)
        self.facts = facts


def _search(records: Sequence[Rec], target: int, lookback: int, target_index: int, wanted: int) -> int:
    floor = target_index
    acc = 0
    for j in range(target_index, -1, -1):
        acc += records[j][1]
        if acc > lookback:
            break
        floor = j
    for cut in range(target_index, floor - 1, -1):
        if is_legal_cut(records, cut):
            return cut
    answered = {r[2] for r in records if r[0] == "tool_result"}
    raise Deferred(
        target_tokens=target,
        lookback_tokens=lookback,
        target_index=target_index,
        floor=floor,
        nearest_legal_below=next((c for c in range(floor - 1, -1, -1) if is_legal_cut(records, c)), None),
        nearest_legal_above=next(
            (c for c in range(target_index + 1, len(records) + 1) if is_legal_cut(records, c)), None
        ),
        waiting_on=[r[2] for r in records[:wanted] if r[0] == "tool_use" and r[2] not in answered],
    )


def select_legal_cut(records: Sequence[Rec], target: int, lookback: int) -> int:
    """The selector with the tracker's one documented difference: a target covering
    the whole log returns ``len`` only when it is legal."""
    total = sum(r[1] for r in records)
    if target >= total:
        if is_legal_cut(records, len(records)):
            return len(records)
        return _search(records, target, lookback, len(records) - 1, len(records))
    acc = 0
    for i, r in enumerate(records):
        acc += r[1]
        if acc >= target:
            return _search(records, target, lookback, i, i)
    raise AssertionError("unreachable")
