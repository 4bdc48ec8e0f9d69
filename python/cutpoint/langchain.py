"""cutpoint for LangChain: ``check`` and ``compact`` on lists of ``BaseMessage``, and
``CutpointMiddleware`` for ``langchain.agents.create_agent``.

Needs ``langchain-core`` (and ``langchain`` for the middleware):
``pip install "cutpoint[langchain]"``. Importing ``cutpoint`` alone never imports
LangChain.

Messages are converted to OpenAI Chat dicts (``to_openai_dicts``) with every tool
call id kept, checked and compacted by cutpoint as ``"openai-chat"``, and the
compacted list is rebuilt from your own message objects: every message a strategy
left as it was is the very object you passed; one it edited in place (``clear``: a
``ToolMessage`` whose content became the placeholder, an ``AIMessage`` whose call
arguments were cleared) is a copy of yours with that change; the messages it wrote
(the ``summarize`` summary, a ``digest`` or ``slide`` ledger) are new messages marked
in ``response_metadata["cutpoint"]``, their text listing every tool call they stand
for (id, tool, arguments verbatim, first line of its result).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Sequence

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        convert_to_messages,
    )
except ImportError as e:  # pragma: no cover - exercised only without LangChain
    raise ImportError(
        "cutpoint.langchain needs langchain-core: pip install 'cutpoint[langchain]'"
    ) from e

import cutpoint
from cutpoint import Compaction, Violation

logger = logging.getLogger(__name__)

#: The key of ``response_metadata`` that marks a summary message cutpoint wrote.
SUMMARY_METADATA_KEY = "cutpoint"

_ROLES = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "system": "system",
    "developer": "developer",
}


def _content(content: Any) -> Any:
    """Message content as JSON: a string, or content blocks made JSON-safe."""
    if isinstance(content, str):
        return content
    return json.loads(json.dumps(content, default=str))


def _tool_call(call_id: Any, name: Any, arguments: str) -> Dict[str, Any]:
    return {
        "id": call_id or "",
        "type": "function",
        "function": {"name": name or "", "arguments": arguments},
    }


def to_openai_dicts(messages: Sequence[Any]) -> List[Dict[str, Any]]:
    """LangChain messages (or anything ``convert_to_messages`` takes) as OpenAI Chat
    message dicts, one per message, keeping every tool call id: an ``AIMessage``'s
    ``tool_calls`` (and ``invalid_tool_calls``) become ``tool_calls`` with their
    arguments as JSON text, a ``ToolMessage`` a ``tool`` message with its
    ``tool_call_id``. O(len)."""
    return _dicts(convert_to_messages(messages))


def _dicts(messages: Sequence[BaseMessage]) -> List[Dict[str, Any]]:
    """``to_openai_dicts`` on messages already converted. O(len)."""
    out: List[Dict[str, Any]] = []
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": _content(message.content)})
        elif isinstance(message, HumanMessage):
            out.append({"role": "user", "content": _content(message.content)})
        elif isinstance(message, AIMessage):
            item: Dict[str, Any] = {"role": "assistant", "content": _content(message.content)}
            calls = [
                _tool_call(c.get("id"), c.get("name"), json.dumps(c.get("args", {}), default=str))
                for c in message.tool_calls
            ] + [
                _tool_call(c.get("id"), c.get("name"), c.get("args") or "")
                for c in message.invalid_tool_calls
            ]
            if calls:
                item["tool_calls"] = calls
            out.append(item)
        elif isinstance(message, ToolMessage):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id,
                    "content": _content(message.content),
                }
            )
        elif isinstance(message, ChatMessage) and message.role in _ROLES:
            out.append({"role": _ROLES[message.role], "content": _content(message.content)})
        else:
            raise TypeError(
                f"message {index}: cutpoint.langchain cannot map a {type(message).__name__}"
                f" (type {message.type!r}) to an OpenAI Chat message"
            )
    return out


def check(messages: Sequence[Any]) -> List[Violation]:
    """The OpenAI Chat tool-call rule violations of LangChain messages (see
    ``cutpoint.check``): a tool message whose call is gone, a call left without its
    result. O(len)."""
    return cutpoint.check(to_openai_dicts(messages), format="openai-chat")


def compact_report(
    messages: Sequence[Any],
    *,
    strategy: str = "summarize",
    budget: Optional[int] = None,
    token_counter: Optional[Callable[[str], int]] = None,
    **options: Any,
) -> Compaction:
    """``cutpoint.compact_report`` on LangChain messages, with any strategy and its
    options (see ``cutpoint.compact``): ``messages`` of the result is a list of
    ``BaseMessage``, your own objects for the messages kept as they were, copies of
    yours for those edited in place, and new messages (marked in
    ``response_metadata["cutpoint"]``) for the summaries and ledgers cutpoint wrote."""
    originals = convert_to_messages(messages)
    return _report(originals, _dicts(originals), strategy, budget, token_counter, options)


def _is_summary(message: BaseMessage) -> bool:
    return SUMMARY_METADATA_KEY in (message.response_metadata or {})


#: The summary's prose when the caller gives none (the library's default).
DEFAULT_SUMMARY = "Earlier conversation, compacted."


def _report(
    originals: List[BaseMessage],
    dicts: List[Dict[str, Any]],
    strategy: str,
    budget: Optional[int],
    token_counter: Optional[Callable[[str], int]],
    options: Dict[str, Any],
) -> Compaction:
    """``compact_report`` on messages already converted to ``dicts``.

    A summary cutpoint wrote earlier that falls inside the new region is folded into
    the new summary: its text (with its ledger) heads the new summary's prose, and
    the calls it covers stay listed in the new one's metadata, so compacting again
    never loses a call. (The provider-format rewrite treats an earlier summary message
    as plain text, so the fold is done here, where summaries are marked.) The other
    strategies are rebuilt by ``_rebuild``."""
    def run(opts: Dict[str, Any]) -> Compaction:
        return cutpoint.compact_report(
            dicts,
            strategy=strategy,
            budget=budget,
            format="openai-chat",
            token_counter=token_counter,
            **opts,
        )

    if strategy != "summarize":
        report = run(options)
        if not report.changed:
            return replace(report, messages=list(originals))
        return replace(report, messages=_rebuild(originals, dicts, report.messages, strategy))
    prose = options.get("summary") or DEFAULT_SUMMARY
    folded: List[BaseMessage] = []
    report = None
    # Each pass that finds a new earlier summary in the region folds it in; the region
    # does not shrink when the prose grows, so this settles within one pass per summary.
    for _ in range(sum(map(_is_summary, originals)) + 2):
        opts = dict(options)
        opts["summary"] = "\n\n".join([str(m.content) for m in folded] + [prose])
        report = run(opts)
        if not report.changed:
            break
        inside = [m for m in originals[report.head : report.cut] if _is_summary(m)]
        if [id(m) for m in inside] == [id(m) for m in folded]:
            break
        folded = inside
    assert report is not None
    if not report.changed:
        return replace(report, messages=list(originals))
    covers = [
        c for m in folded for c in m.response_metadata[SUMMARY_METADATA_KEY].get("covers", [])
    ] + [u.call_id for u in report.ledger]
    summary_dict = report.summary or {}
    summary = HumanMessage(
        content=summary_dict.get("content", ""),
        response_metadata={
            SUMMARY_METADATA_KEY: {
                "summary": True,
                "strategy": strategy,
                "covers": covers,
                "summarized_tokens": report.summarized_tokens,
            }
        },
    )
    rebuilt = originals[: report.head] + [summary] + originals[report.cut :]
    return replace(report, messages=rebuilt)


def _key(d: Dict[str, Any]) -> Optional[tuple]:
    """What ties an output dict to an input message through any edit: a tool
    message's call id, an assistant message's call ids (``None`` for the rest)."""
    if d.get("role") == "tool":
        return ("tool", d.get("tool_call_id"))
    calls = d.get("tool_calls")
    if d.get("role") == "assistant" and calls:
        return ("calls",) + tuple(c.get("id") for c in calls)
    return None


def _edited(original: BaseMessage, d: Dict[str, Any]) -> BaseMessage:
    """A copy of ``original`` with what a strategy changed in its dict ``d``: a tool
    message's content, an assistant message's content and call arguments."""
    update: Dict[str, Any] = {"content": d.get("content") or ""}
    if isinstance(original, AIMessage):
        arguments = {c.get("id"): c["function"].get("arguments") for c in d.get("tool_calls", [])}
        calls = []
        for call in original.tool_calls:
            args = call.get("args", {})
            text = arguments.get(call.get("id"))
            if text is not None and text != json.dumps(args, default=str):
                try:
                    args = json.loads(text)
                except ValueError:
                    args = {}
            calls.append({**call, "args": args})
        update["tool_calls"] = calls
    return original.model_copy(update=update)


_NEW = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}


def _written(d: Dict[str, Any], strategy: str, gone: List[str]) -> BaseMessage:
    """A message a strategy wrote (a digest, a ledger), marked as cutpoint's; it
    ``covers`` the calls of ``gone`` (calls of the input missing from the output, not
    yet covered) that its ledger lines name; those leave ``gone``."""
    content = d.get("content") or ""
    text = content if isinstance(content, str) else json.dumps(content)
    covers = [i for i in gone if f"- {i} " in text]
    for i in covers:
        gone.remove(i)
    cls = _NEW.get(d.get("role", "user"), HumanMessage)
    return cls(
        content=content,
        response_metadata={
            SUMMARY_METADATA_KEY: {"summary": True, "strategy": strategy, "covers": covers}
        },
    )


def _rebuild(
    originals: List[BaseMessage],
    dicts: List[Dict[str, Any]],
    out: List[Dict[str, Any]],
    strategy: str,
) -> List[BaseMessage]:
    """The LangChain messages of a compacted list of dicts ``out``, aligned with the
    input in order (the strategies keep, edit, drop or replace messages, never
    reorder them): a tool or assistant-with-calls message by its call ids, any other
    by equality. O(len) for edits in place; a dict matching no input message is
    searched for over the rest of the input, O(len) each."""
    rebuilt: List[BaseMessage] = []
    kept = {c.get("id") for d in out for c in d.get("tool_calls") or []}
    gone = [
        c.get("id") for d in dicts for c in d.get("tool_calls") or [] if c.get("id") not in kept
    ]
    j = 0
    for d in out:
        key = _key(d)
        k = next(
            (
                i
                for i in range(j, len(dicts))
                if (key is not None and _key(dicts[i]) == key) or (key is None and dicts[i] == d)
            ),
            None,
        )
        if k is None:
            rebuilt.append(_written(d, strategy, gone))
            continue
        rebuilt.append(originals[k] if dicts[k] == d else _edited(originals[k], d))
        j = k + 1
    return rebuilt


def compact(
    messages: Sequence[Any],
    *,
    strategy: str = "summarize",
    budget: Optional[int] = None,
    token_counter: Optional[Callable[[str], int]] = None,
    **options: Any,
) -> List[BaseMessage]:
    """``cutpoint.compact`` on LangChain messages: a new list that never splits an
    ``AIMessage``'s tool calls from their ``ToolMessage``\\ s. Raises
    ``cutpoint.DeferError`` when no legal cut can be used yet (calls still in
    flight)."""
    return compact_report(
        messages, strategy=strategy, budget=budget, token_counter=token_counter, **options
    ).messages


try:
    from langchain.agents.middleware.types import AgentMiddleware
    from langchain_core.messages import RemoveMessage
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    _HAVE_AGENTS = True
except ImportError:  # pragma: no cover - exercised only without langchain
    _HAVE_AGENTS = False


if _HAVE_AGENTS:

    class CutpointMiddleware(AgentMiddleware):  # type: ignore[type-arg]
        """A ``create_agent`` middleware that compacts the agent's messages with a
        cutpoint strategy before each model call, never splitting a tool call from its
        result.

        When the messages hold more than ``trigger`` tokens (default: ``budget``), it
        compacts them toward ``budget`` tokens and replaces the state's messages
        with the result (as LangChain's ``SummarizationMiddleware`` does), so later
        turns build on the compacted history; a strategy that cannot reach the
        budget (its floors, the calls in flight) gives what it can, and
        ``last.met_budget`` says whether it fit. When no legal cut can be used yet (a
        call still in flight), it leaves the messages as they are and tries again
        before the next model call.

        Args:
            budget: tokens the messages may hold after compaction.
            trigger: compact only above this many tokens (default: ``budget``).
            strategy: the cutpoint strategy: any of ``cutpoint.STRATEGIES``
                (``"summarize"``, ``"clear"``, ``"clear-thinking"``, ``"digest"``,
                ``"slide"``, ``"truncate"``, ``"pipeline"``; see
                ``cutpoint.compact``).
            token_counter: ``str -> int`` for each content block's JSON text (default:
                cutpoint's estimate, a token per four bytes).
            **options: the strategy's options, passed through (``keep_head``,
                ``summary``, ``keep_tool_uses``, ``preset``, ...; an option it does
                not take raises ``TypeError`` here, at construction).
        """

        def __init__(
            self,
            *,
            budget: int,
            trigger: Optional[int] = None,
            strategy: str = "summarize",
            token_counter: Optional[Callable[[str], int]] = None,
            **options: Any,
        ) -> None:
            super().__init__()
            if strategy not in cutpoint.STRATEGIES:
                raise ValueError(
                    f"unknown strategy {strategy!r}; one of: {', '.join(cutpoint.STRATEGIES)}"
                )
            # A dry run on an empty log: an option the strategy does not take fails
            # here, not at the agent's first model call.
            cutpoint.compact([], strategy=strategy, budget=budget, format="openai-chat", **options)
            self.budget = budget
            self.trigger = budget if trigger is None else trigger
            self.strategy = strategy
            self.token_counter = token_counter
            self.options = options
            #: The last compaction done (``None`` before the first).
            self.last: Optional[Compaction] = None

        def _compact(self, messages: Sequence[BaseMessage]) -> Optional[Dict[str, Any]]:
            if not messages:
                return None
            originals = convert_to_messages(messages)
            dicts = _dicts(originals)
            tokens = cutpoint.count_tokens(dicts, "openai-chat", self.token_counter)
            if tokens <= self.trigger:
                return None
            try:
                report = _report(
                    originals, dicts, self.strategy, self.budget, self.token_counter, self.options
                )
            except cutpoint.DeferError as e:
                logger.info("cutpoint: compaction deferred: %s", e)
                return None
            if not report.changed:
                return None
            self.last = report
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *report.messages]}

        def before_model(self, state: Any, runtime: Any) -> Optional[Dict[str, Any]]:
            """Compacts ``state["messages"]`` when over the trigger."""
            return self._compact(state["messages"])

        async def abefore_model(self, state: Any, runtime: Any) -> Optional[Dict[str, Any]]:
            """As ``before_model`` (the work is CPU-bound and short)."""
            return self._compact(state["messages"])


def __getattr__(name: str) -> Any:
    if name == "CutpointMiddleware":
        raise ImportError(
            "cutpoint.langchain.CutpointMiddleware needs langchain (v1): "
            "pip install 'cutpoint[langchain]'"
        )
    raise AttributeError(f"module 'cutpoint.langchain' has no attribute {name!r}")


__all__ = [
    "CutpointMiddleware",
    "SUMMARY_METADATA_KEY",
    "check",
    "compact",
    "compact_report",
    "to_openai_dicts",
]
