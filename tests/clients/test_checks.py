"""The request checkers must fail on what they exist to catch (run by scripts/clients.sh
before the clients: `python3 -m unittest discover -s tests/clients`)."""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

import checks  # noqa: E402


def use(i):
    return {"type": "tool_use", "id": i, "name": "Read", "input": {}}


def res(i):
    return {"type": "tool_result", "tool_use_id": i, "content": "ok"}


class Anthropic(unittest.TestCase):
    def ok(self, msgs):
        return checks.pairing_anthropic({"messages": msgs})

    def test_paired(self):
        self.assertEqual(self.ok([{"role": "user", "content": "hi"},
                                  {"role": "assistant", "content": [use("a"), use("b")]},
                                  {"role": "user", "content": [res("b"), res("a"), {"type": "text", "text": "go"}]}]), [])

    def test_unanswered_orphan_twice_late(self):
        self.assertTrue(self.ok([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [use("a")]},
                                 {"role": "user", "content": "no result"}]))
        self.assertTrue(self.ok([{"role": "user", "content": [res("x")]}]))
        self.assertTrue(self.ok([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [use("a")]},
                                 {"role": "user", "content": [res("a"), res("a")]}]))
        self.assertTrue(self.ok([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [use("a")]},
                                 {"role": "user", "content": [{"type": "text", "text": "t"}, res("a")]}]))
        self.assertTrue(self.ok([{"role": "assistant", "content": "first"}]))

    def test_thinking_needs_signature(self):
        self.assertTrue(self.ok([{"role": "user", "content": "hi"},
                                 {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}]))


class Responses(unittest.TestCase):
    def test_rules(self):
        call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
        out = {"type": "function_call_output", "call_id": "c", "output": "ok"}
        msg = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}
        self.assertEqual(checks.pairing_responses({"input": [msg, call, out]}), [])
        self.assertTrue(checks.pairing_responses({"input": [msg, call]}))
        self.assertTrue(checks.pairing_responses({"input": [out, call]}))
        self.assertTrue(checks.pairing_responses({"input": [call, out, out]}))
        self.assertTrue(checks.pairing_responses({"input": [msg, {"type": "reasoning", "summary": []}]}))
        self.assertTrue(checks.pairing_responses({"input": [{"type": "custom_tool_call", "call_id": "c"}, out]}))


class Gemini(unittest.TestCase):
    def test_rules(self):
        u = {"role": "user", "parts": [{"text": "hi"}]}
        c = {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}
        r = {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}
        g = {"role": "user", "parts": [{"functionResponse": {"name": "g", "response": {}}}]}
        self.assertEqual(checks.pairing_gemini({"contents": [u, c, r]}), [])
        self.assertTrue(checks.pairing_gemini({"contents": [u, c, u]}))
        self.assertTrue(checks.pairing_gemini({"contents": [u, r]}))
        self.assertTrue(checks.pairing_gemini({"contents": [u, c, g]}))


if __name__ == "__main__":
    unittest.main()
