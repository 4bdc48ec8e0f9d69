"""A loopback stand-in for the three provider APIs the real clients call.

It records every request (method, path, headers, parsed JSON body) and answers with the
smallest reply each client accepts:

- Anthropic Messages (`POST /v1/messages`): a streamed message with one text block.
- OpenAI Responses (`POST /v1/responses`): a streamed response with one output message;
  a WebSocket upgrade on `GET /v1/responses` gets 426 so Codex falls back to HTTP.
- Gemini (`...:generateContent`, `...:streamGenerateContent`): one candidate with one text
  part (the routing classifier's call gets a JSON answer naming a model).

Anything else gets an empty JSON object (404 for unknown GETs). Loopback only; each run
starts its own server on a free port.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY_TEXT = "stand-in reply"


def _sse(events: list[tuple[str | None, dict]]) -> bytes:
    out = []
    for name, data in events:
        if name:
            out.append(f"event: {name}\n")
        out.append(f"data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


def anthropic_stream(model: str) -> bytes:
    msg = {
        "id": "msg_standin",
        "type": "message",
        "role": "assistant",
        "model": model or "claude-standin",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    return _sse(
        [
            ("message_start", {"type": "message_start", "message": msg}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": REPLY_TEXT}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 3},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def responses_stream(model: str) -> bytes:
    item = {
        "id": "msg_standin",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": REPLY_TEXT, "annotations": []}],
    }
    resp = {"id": "resp_standin", "object": "response", "model": model or "gpt-standin", "status": "in_progress", "output": []}
    done = dict(resp, status="completed", output=[item],
                usage={"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 13})
    added = dict(item, status="in_progress", content=[])
    return _sse(
        [
            ("response.created", {"type": "response.created", "sequence_number": 0, "response": resp}),
            ("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": added}),
            (
                "response.output_text.delta",
                {"type": "response.output_text.delta", "sequence_number": 2, "item_id": "msg_standin",
                 "output_index": 0, "content_index": 0, "delta": REPLY_TEXT},
            ),
            ("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 3, "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "sequence_number": 4, "response": done}),
        ]
    )


def gemini_candidate(text: str) -> dict:
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3, "totalTokenCount": 13},
        "modelVersion": "gemini-standin",
    }


class Recorder:
    """A stand-in server on 127.0.0.1 with an ephemeral port; `requests` holds what came in."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        rec = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _record(self, body: bytes) -> dict:
                try:
                    parsed = json.loads(body) if body else None
                except ValueError:
                    parsed = None
                entry = {"t": time.monotonic(), "method": self.command, "path": self.path, "headers": dict(self.headers), "json": parsed,
                         "raw_len": len(body), "sha256": hashlib.sha256(body).hexdigest()}
                with rec._lock:
                    rec.requests.append(entry)
                return entry

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._record(b"")
                if self.path.startswith("/v1/responses") or self.headers.get("Upgrade"):
                    self._send(426, b'{"error":"upgrade not supported"}', "application/json")
                elif self.path.startswith("/v1/models"):
                    self._send(200, b'{"data":[],"models":[]}', "application/json")
                else:
                    self._send(404, b"{}", "application/json")

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                if not n and self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    body = self._read_chunked()
                entry = self._record(body)
                j = entry["json"] if isinstance(entry["json"], dict) else {}
                p = self.path
                if p.startswith("/v1/messages/count_tokens"):
                    self._send(200, b'{"input_tokens": 10}', "application/json")
                elif p.startswith("/v1/messages"):
                    self._send(200, anthropic_stream(j.get("model", "")), "text/event-stream")
                elif p.startswith("/v1/responses"):
                    self._send(200, responses_stream(j.get("model", "")), "text/event-stream")
                elif ":streamGenerateContent" in p:
                    chunk = json.dumps(gemini_candidate(REPLY_TEXT))
                    self._send(200, f"data: {chunk}\r\n\r\n".encode(), "text/event-stream")
                elif ":generateContent" in p:
                    # The routing classifier wants JSON naming a model; any other caller gets text.
                    # Both classifier schemas of Gemini CLI 0.61 (it ignores keys it does not ask for).
                    text = json.dumps({"reasoning": "stand-in", "model_choice": "flash",
                                       "complexity_reasoning": "stand-in", "complexity_score": 10})
                    self._send(200, json.dumps(gemini_candidate(text)).encode(), "application/json")
                elif ":countTokens" in p:
                    self._send(200, b'{"totalTokens": 10}', "application/json")
                else:
                    self._send(200, b"{}", "application/json")

            def _read_chunked(self) -> bytes:
                out = b""
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address) -> None:
                pass  # a client hanging up (Codex closing its WebSocket attempt) is not news

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "Recorder":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
