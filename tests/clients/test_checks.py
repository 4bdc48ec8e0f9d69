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


class AnthropicMerged(unittest.TestCase):
    """Consecutive same-role messages read as the API merges them."""

    def test_a_summary_message_after_the_first_prompt_is_one_turn(self):
        msgs = [{"role": "user", "content": "hi"}, {"role": "user", "content": [{"type": "text", "text": "summary"}]},
                {"role": "assistant", "content": [use("a")]}, {"role": "user", "content": [res("a")]}]
        self.assertEqual(checks.pairing_anthropic({"messages": msgs}), ["message 1: two user messages in a row"])
        self.assertEqual(checks.pairing_anthropic_merged({"messages": msgs}), [])
        self.assertEqual(len(checks.merged_anthropic({"messages": msgs})["messages"]), 3)

    def test_the_merge_does_not_hide_a_result_cut_from_its_call(self):
        # A text between a call and its result: merged, the result follows other content.
        msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [use("a")]},
                {"role": "user", "content": "summary"}, {"role": "user", "content": [res("a")]}]
        self.assertIn("message 2: tool_result after other content", checks.pairing_anthropic_merged({"messages": msgs}))
        # An assistant message between them: not answered in the next message.
        msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [use("a")]},
                {"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}, {"role": "user", "content": [res("a")]}]
        errs = checks.pairing_anthropic_merged({"messages": msgs})
        self.assertIn("message 1: tool_use a not answered in message 2", errs)
        self.assertIn("message 4: tool_result a answers no tool_use of message 3", errs)


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
