"""What a session file holds, per client format, for the checks: which records a client sends to
the model, the texts and call ids in them, and whether a file can be resumed at all.

Texts are what a model would read: message text, tool-call arguments, tool-result text. The
checks compare them with the strings of the recorded request, so a client that wraps a text
(Claude Code's "This session is being continued..." preamble) still counts it as delivered.
"""

from __future__ import annotations

import json


def read(fmt: str, data: bytes) -> list[tuple[bytes, object]]:
    """The file's records as (raw line, parsed value). Gemini CLI files (one JSON document, or
    JSON lines in 0.61) give one record per message."""
    if fmt == "gemini-cli":
        text = data.decode()
        try:
            doc = json.loads(text)
            return [(json.dumps(m, sort_keys=True).encode(), m) for m in doc.get("messages", [])]
        except ValueError:
            out = []
            for line in text.splitlines():
                if line.strip():
                    v = json.loads(line)
                    if isinstance(v, dict) and "type" in v and "id" in v:
                        out.append((json.dumps(v, sort_keys=True).encode(), v))
            return out
    out = []
    for line in data.split(b"\n"):
        if line.strip():
            out.append((line, json.loads(line)))
    return out


def session_id(fmt: str, data: bytes) -> str | None:
    if fmt == "claude-code":
        for _, r in read(fmt, data):
            if isinstance(r, dict) and r.get("sessionId") and not r.get("isSidechain"):
                return r["sessionId"]
        return None
    if fmt == "codex":
        first = json.loads(data.split(b"\n", 1)[0])
        return first["payload"]["id"]
    if fmt == "gemini-cli":
        text = data.decode()
        try:
            return json.loads(text)["sessionId"]
        except ValueError:
            return json.loads(text.splitlines()[0])["sessionId"]
    raise ValueError(fmt)


def sidechain_only(fmt: str, data: bytes) -> bool:
    """Claude Code subagent and compaction side files: every message record is `isSidechain`."""
    if fmt != "claude-code":
        return False
    msgs = [r for _, r in read(fmt, data) if isinstance(r, dict) and r.get("type") in ("user", "assistant")]
    return bool(msgs) and all(r.get("isSidechain") for r in msgs)


def _content_texts(content) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for b in content:
            if isinstance(b, str):
                out.append(b)
            elif isinstance(b, dict):
                if isinstance(b.get("text"), str):
                    out.append(b["text"])
                if b.get("type") == "tool_result":
                    out.extend(_content_texts(b.get("content")))
                if b.get("type") == "tool_use":
                    out.append(b.get("id", ""))
                if isinstance(b.get("thinking"), str):
                    out.append(b["thinking"])
    return out


def _codex_item_texts(p: dict) -> list[str]:
    t = p.get("type")
    if t == "message":
        return _content_texts(p.get("content"))
    if t in ("function_call", "custom_tool_call"):
        return [p.get("call_id", ""), p.get("arguments") or p.get("input") or ""]
    if t in ("function_call_output", "custom_tool_call_output"):
        o = p.get("output")
        if isinstance(o, dict):
            o = o.get("content")
        return [p.get("call_id", "")] + _content_texts(o)
    return []


def sent_texts(fmt: str, record) -> list[str] | None:
    """The texts a client sends to the model from this record, or None when the record is not a
    model-facing one (metadata, events, side conversations)."""
    if not isinstance(record, dict):
        return None
    if fmt == "claude-code":
        if record.get("type") not in ("user", "assistant") or record.get("isSidechain"):
            return None
        msg = record.get("message") or {}
        return _content_texts(msg.get("content"))
    if fmt == "codex":
        p = record.get("payload") or {}
        if record.get("type") == "response_item":
            return _codex_item_texts(p)
        if record.get("type") == "compacted":
            # Codex rebuilds the input from the replacement history when there is one, and
            # from the message (as a user message) only when there is not.
            hist = p.get("replacement_history")
            if hist:
                return [t for item in hist for t in _codex_item_texts(item)]
            return [p["message"]] if isinstance(p.get("message"), str) else []
        return None
    if fmt == "gemini-cli":
        if record.get("type") not in ("user", "gemini"):
            return None
        out = _content_texts(record.get("content"))
        for c in record.get("toolCalls") or []:
            for r in c.get("result") or []:
                fr = r.get("functionResponse") if isinstance(r, dict) else None
                if fr and isinstance(fr.get("response"), dict):
                    out.extend(v for v in fr["response"].values() if isinstance(v, str))
        return out
    raise ValueError(fmt)


def call_ids(fmt: str, record) -> list[str]:
    """Ids of the calls (not the results) in this model-facing record, in order."""
    if not isinstance(record, dict):
        return []
    if fmt == "claude-code":
        c = (record.get("message") or {}).get("content")
        if not isinstance(c, list):
            return []
        return [b.get("id") for b in c if isinstance(b, dict) and b.get("type") == "tool_use"]
    if fmt == "codex":
        p = record.get("payload") or {}
        if record.get("type") == "response_item" and p.get("type") in ("function_call", "custom_tool_call"):
            return [p.get("call_id")]
        return []
    if fmt == "gemini-cli":
        return [c.get("id") for c in record.get("toolCalls") or [] if c.get("id")]
    return []


def all_ids(fmt: str, record) -> list[str]:
    """Ids of the calls and the results in this model-facing record."""
    if not isinstance(record, dict):
        return []
    if fmt == "claude-code":
        c = (record.get("message") or {}).get("content")
        return [b.get("id") or b.get("tool_use_id") for b in c if isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")] if isinstance(c, list) else []
    if fmt == "codex":
        p = record.get("payload") or {}
        return [p["call_id"]] if record.get("type") == "response_item" and p.get("call_id") else []
    return call_ids(fmt, record)


def is_boundary(fmt: str, record) -> bool:
    """A record from which on the client rebuilds the conversation (Claude Code's
    `compact_boundary`, Codex's `compacted`)."""
    if not isinstance(record, dict):
        return False
    if fmt == "claude-code":
        return record.get("type") == "system" and record.get("subtype") == "compact_boundary"
    if fmt == "codex":
        return record.get("type") == "compacted"
    return False
