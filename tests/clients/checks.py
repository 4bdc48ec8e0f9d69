"""Checks on the request a real client sent: the provider's pairing and reasoning rules, written
for the test and independent of cutpoint's own checker, and the strings the request carries.

Each `pairing_*` returns a list of violations (empty when the request is well paired), each
naming the message or item index and the call id.
"""

from __future__ import annotations

import json
from collections import Counter


def strings(value) -> list[str]:
    """Every string value in a JSON value, depth first (keys excluded)."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def pairing_anthropic(body: dict) -> list[str]:
    """Messages API: the first message is the user's; every `tool_use` is answered by exactly one
    `tool_result` with its id in the very next message, which is the user's and starts with its
    results; no `tool_result` answers anything else; `tool_use` ids are unique; every `thinking`
    block carries a signature and `redacted_thinking` its data."""
    errs: list[str] = []
    msgs = body.get("messages") or []
    if not msgs:
        return ["no messages"]
    if msgs[0].get("role") != "user":
        errs.append("message 0: first message is not the user's")
    seen_use: Counter[str] = Counter()

    def blocks(m):
        c = m.get("content")
        return c if isinstance(c, list) else []

    for i, m in enumerate(msgs):
        role = m.get("role")
        if i and role == msgs[i - 1].get("role"):
            errs.append(f"message {i}: two {role} messages in a row")
        uses = [b["id"] for b in blocks(m) if b.get("type") == "tool_use"]
        for b in blocks(m):
            if b.get("type") == "thinking" and not b.get("signature"):
                errs.append(f"message {i}: thinking block without a signature")
            if b.get("type") == "redacted_thinking" and not b.get("data"):
                errs.append(f"message {i}: redacted_thinking without data")
        for u in uses:
            seen_use[u] += 1
            if seen_use[u] > 1:
                errs.append(f"message {i}: tool_use id {u} used twice")
        if role == "user":
            results = [b.get("tool_use_id") for b in blocks(m) if b.get("type") == "tool_result"]
            prev = msgs[i - 1] if i else None
            prev_uses = [b["id"] for b in blocks(prev) if b.get("type") == "tool_use"] if prev and prev.get("role") == "assistant" else []
            counts = Counter(results)
            for r, n in counts.items():
                if r not in prev_uses:
                    errs.append(f"message {i}: tool_result {r} answers no tool_use of message {i - 1}")
                elif n > 1:
                    errs.append(f"message {i}: tool_use {r} answered {n} times")
            if results:
                kinds = [b.get("type") for b in blocks(m)]
                first_other = next((k for k, t in enumerate(kinds) if t != "tool_result"), len(kinds))
                if any(t == "tool_result" for t in kinds[first_other:]):
                    errs.append(f"message {i}: tool_result after other content")
        if role == "assistant" and uses:
            nxt = msgs[i + 1] if i + 1 < len(msgs) else None
            answered = Counter(b.get("tool_use_id") for b in blocks(nxt) if b.get("type") == "tool_result") if nxt and nxt.get("role") == "user" else Counter()
            for u in uses:
                if not answered.get(u):
                    errs.append(f"message {i}: tool_use {u} not answered in message {i + 1}")
    return errs


def merged_anthropic(body: dict) -> dict:
    """The request as the Messages API reads it: consecutive messages of one role merged into
    one turn, their content blocks in order (a string content as one text block). A client
    merges them itself before sending (Claude Code does); a proxy that writes a summary as a
    user message of its own next to a user turn leaves that to the API."""
    merged: list[dict] = []
    for m in body.get("messages") or []:
        c = m.get("content")
        blocks = [{"type": "text", "text": c}] if isinstance(c, str) else list(c) if isinstance(c, list) else []
        if merged and merged[-1].get("role") == m.get("role"):
            merged[-1]["content"] += blocks
        else:
            merged.append(dict(m, content=blocks))
    return dict(body, messages=merged)


def pairing_anthropic_merged(body: dict) -> list[str]:
    """`pairing_anthropic` on `merged_anthropic(body)`: every rule but "two messages of one role
    in a row", which the API's merge makes moot; a result that the merge puts after other
    content, or out of the message right after its call, still fails."""
    return pairing_anthropic(merged_anthropic(body))


def pairing_responses(body: dict) -> list[str]:
    """Responses API input: every `function_call` / `custom_tool_call` is answered by exactly one
    output of its kind with its `call_id`, after it; no output answers a call not before it; call
    ids are unique; a `reasoning` item is followed by another item (not the last item)."""
    errs: list[str] = []
    items = body.get("input") or []
    calls: dict[str, int] = {}
    answered: Counter[str] = Counter()
    out_kind = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
    call_kind: dict[str, str] = {}
    for i, it in enumerate(items):
        t = it.get("type", "message" if "role" in it else None)
        if t in out_kind:
            cid = it.get("call_id")
            if cid in calls:
                errs.append(f"item {i}: call id {cid} used twice")
            calls[cid] = i
            call_kind[cid] = out_kind[t]
        elif t in ("function_call_output", "custom_tool_call_output"):
            cid = it.get("call_id")
            if cid not in calls:
                errs.append(f"item {i}: {t} {cid} answers no earlier call")
            elif call_kind[cid] != t:
                errs.append(f"item {i}: {t} {cid} answers a call of another kind")
            answered[cid] += 1
        elif t == "reasoning":
            if i + 1 >= len(items):
                errs.append(f"item {i}: reasoning is the last item")
    for cid, i in calls.items():
        if answered[cid] == 0:
            errs.append(f"item {i}: call {cid} not answered")
        elif answered[cid] > 1:
            errs.append(f"item {i}: call {cid} answered {answered[cid]} times")
    return errs


def pairing_gemini(body: dict) -> list[str]:
    """Gemini contents: the first content is the user's; a model content's `functionCall` parts
    are answered one for one (same names, same ids when given) by the `functionResponse` parts of
    the very next content, which is the user's; no `functionResponse` elsewhere."""
    errs: list[str] = []
    cs = body.get("contents") or []
    if not cs:
        return ["no contents"]
    if cs[0].get("role") != "user":
        errs.append("content 0: first content is not the user's")

    def parts(c, key):
        return [p[key] for p in (c.get("parts") or []) if isinstance(p, dict) and key in p]

    for i, c in enumerate(cs):
        calls = parts(c, "functionCall")
        resps = parts(c, "functionResponse")
        if resps:
            prev = cs[i - 1] if i else {}
            pc = parts(prev, "functionCall") if prev.get("role") == "model" else []
            if c.get("role") != "user":
                errs.append(f"content {i}: functionResponse in a {c.get('role')} content")
            if not pc:
                errs.append(f"content {i}: functionResponse answers no functionCall")
        if calls:
            nxt = cs[i + 1] if i + 1 < len(cs) else {}
            nr = parts(nxt, "functionResponse") if nxt.get("role") == "user" else []
            if len(nr) != len(calls):
                errs.append(f"content {i}: {len(calls)} functionCall parts, {len(nr)} responses in content {i + 1}")
            else:
                for a, b in zip(sorted(calls, key=lambda x: (x.get("id") or "", x.get("name"))),
                                sorted(nr, key=lambda x: (x.get("id") or "", x.get("name")))):
                    if a.get("name") != b.get("name") or (a.get("id") and b.get("id") and a["id"] != b["id"]):
                        errs.append(f"content {i}: functionCall {a.get('id') or a.get('name')} answered by {b.get('id') or b.get('name')}")
    return errs


PAIRING = {"claude-code": pairing_anthropic, "codex": pairing_responses, "gemini-cli": pairing_gemini}


def conversation(fmt: str, body: dict):
    """The part of the request body that holds the conversation."""
    return body.get({"claude-code": "messages", "codex": "input", "gemini-cli": "contents"}[fmt]) or []


def call_ids_in_request(fmt: str, body: dict) -> list[str]:
    """Ids of the calls (not the results) in the request, in order."""
    out = []
    for m in conversation(fmt, body):
        if fmt == "claude-code":
            c = m.get("content")
            out += [b.get("id") for b in (c if isinstance(c, list) else []) if b.get("type") == "tool_use"]
        elif fmt == "codex":
            if m.get("type") in ("function_call", "custom_tool_call"):
                out.append(m.get("call_id"))
        else:
            out += [p["functionCall"].get("id") for p in m.get("parts") or [] if "functionCall" in p and p["functionCall"].get("id")]
    return out


def ids_in_request(fmt: str, body: dict) -> set[str]:
    """Ids of every call and result in the request."""
    out: set[str] = set()
    for m in conversation(fmt, body):
        if fmt == "claude-code":
            c = m.get("content")
            for b in c if isinstance(c, list) else []:
                if b.get("type") in ("tool_use", "tool_result"):
                    out.add(b.get("id") or b.get("tool_use_id"))
        elif fmt == "codex":
            if m.get("call_id"):
                out.add(m["call_id"])
        else:
            for p in m.get("parts") or []:
                for k in ("functionCall", "functionResponse"):
                    if k in p and p[k].get("id"):
                        out.add(p[k]["id"])
    return out


def dumps(v) -> str:
    return json.dumps(v, ensure_ascii=False)
