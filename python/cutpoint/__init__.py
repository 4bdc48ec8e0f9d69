"""cutpoint: keeps an LLM agent's conversation log safe to compact.

A transcript is a sequence of typed records where every tool call has exactly one
result with the same id. A compaction cut chosen by token count alone can land between
the two; strict providers then reject the request, lenient ones let the model invent
the missing call. cutpoint knows which cuts are safe ("legal"), checks logs against
the providers' tool-call rules, and compacts without ever splitting a pair.

- ``Tracker``: the incremental index of legal cuts, fed one ``Record`` at a time
  (or by streaming ``Event``\\ s); O(1) per record, O(log n) per query.
- ``check(messages, format=...)``: the provider-rule violations of a log.
- ``compact(messages, strategy=..., budget=...)``: a compacted copy of a log, by
  any of the library's strategies (``clear``, ``clear-thinking``, ``digest``,
  ``summarize``, ``slide``, ``truncate``, or a preset ``pipeline`` of them).
- ``cutpoint.langchain``: the same on LangChain messages, and a middleware for
  ``create_agent`` (imported only when you import it; needs LangChain).

Logs are plain Python data in a provider's shape: a list of message dicts (OpenAI
Chat ``"openai-chat"``, Anthropic Messages ``"anthropic"``, OpenAI Responses input
items ``"openai-responses"``, Gemini contents ``"gemini"``), a request body dict
holding such a list (``messages`` / ``input`` / ``contents``), a list of cutpoint
record dicts (``"records"``: ``{"kind": ..., "tokens": ..., "call_id": ...}``), or the
text of a log file in any format the library reads (also ``"claude-code"``,
``"codex"`` and ``"gemini-cli"``). ``format="auto"`` tells the format from the shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import (
    AppendError,
    CutpointError,
    DeferError,
    EventError,
    FormatError,
    ReplaceError,
)
from ._native import (
    AVAILABLE_STRATEGIES,
    STRATEGIES,
    Anomalies,
    Appended,
    Event,
    Handled,
    PendingCall,
    Record,
    Tracker,
    Violation,
    __version__,
)

#: A log: a list of message (or record) dicts, a request body dict, or a file's text.
LogLike = Union[str, Sequence[Mapping[str, Any]], Mapping[str, Any]]

#: Counts the tokens of one content block's JSON text.
TokenCounter = Callable[[str], int]

#: The formats a log may be in; ``"auto"`` tells it from the shape.
FORMATS = (
    "auto",
    "records",
    "anthropic",
    "openai-chat",
    "openai-responses",
    "gemini",
    "claude-code",
    "codex",
    "gemini-cli",
)


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"a cutpoint log must be JSON-serializable: {e}") from e


def _looks_like_records(log: Any) -> bool:
    """A list whose first item is a cutpoint record dict (``kind``, no ``role`` or
    ``type``)."""
    if isinstance(log, (str, bytes, Mapping)) or not isinstance(log, Sequence) or not log:
        return False
    first = log[0]
    return (
        isinstance(first, Mapping)
        and "kind" in first
        and "role" not in first
        and "type" not in first
    )


def _document(log: LogLike, format: str) -> Tuple[str, str]:
    """The text the readers take, and the format to read it as (``auto`` kept unless
    the log is a list of record dicts)."""
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; one of: {', '.join(FORMATS)}")
    if isinstance(log, str):
        return log, format
    if isinstance(log, bytes):
        return log.decode("utf-8"), format
    if format == "records" or (format == "auto" and _looks_like_records(log)):
        if isinstance(log, Mapping):
            raise TypeError("a records log is a list of record dicts, not a dict")
        return "".join(_dumps(r) + "\n" for r in log), "records"
    if not isinstance(log, (Mapping, Sequence)):
        raise TypeError(
            f"a log is a list of message dicts, a request body dict or a str, not {type(log).__name__}"
        )
    return _dumps(log if isinstance(log, Mapping) else list(log)), format


def check(messages: LogLike, format: str = "auto") -> List[Violation]:
    """The provider-rule violations of a log, in message order.

    Each ``Violation`` names the rule (``"openai-chat/tool-call-without-response"``,
    ...), the index of the message that breaks it (``message``), the 1-based ``line``
    of the input where it starts, the ``call_id`` concerned, whether an unanswered call
    is still in flight at the very end of the log (``pending_at_end``), and the
    provider's error ``text``. An empty list means the provider would accept the
    log's tool-call structure. Records logs are checked as ``cutpoint check`` checks
    them, for the five conditions of safe compaction: the rule is the violation's kind
    (``"unanswered-call"``, ``"pending-at-end"``, ``"orphan-result"``, ...), ``message``
    the record's index, and ``text`` empty.

    O(len). Raises ``FormatError`` when the log cannot be read in ``format``.
    """
    text, fmt = _document(messages, format)
    return _native.check(text, fmt)


def legal_cuts(messages: LogLike, format: str = "auto") -> List[int]:
    """The legal cuts of a log, as message indices, increasing: keeping
    ``messages[c:]`` (after a pinned head and a summary) splits no tool-call pair and
    no message a provider binds to the one before it. For records logs the indices
    are records. O(len)."""
    text, fmt = _document(messages, format)
    return _native.legal_cuts(text, fmt)


def detect(messages: LogLike) -> str:
    """The format ``format="auto"`` would read the log as. O(len). Raises
    ``FormatError`` when it cannot tell (a log of plain text messages is valid
    Anthropic and OpenAI Chat alike: pass ``format``)."""
    text, fmt = _document(messages, "auto")
    return fmt if fmt != "auto" else _native.detect(text)


def count_tokens(
    messages: LogLike, format: str = "auto", token_counter: Optional[TokenCounter] = None
) -> int:
    """Tokens of the log's live history as ``compact`` counts them: ``token_counter``
    (called with each content block's JSON text) or cutpoint's estimate of one token
    per four bytes. O(len)."""
    text, fmt = _document(messages, format)
    return _native.count_tokens(text, fmt, token_counter)


@dataclass(frozen=True)
class LedgerEntry:
    """One tool call a summary covers: its id, tool name, arguments (verbatim JSON
    text), how it ended (``"ok"``, ``"error"``, ``"aborted"`` or ``None``) and the first
    line of its result."""

    call_id: str
    tool: Optional[str]
    arguments: Optional[str]
    status: Optional[str]
    first_line: Optional[str]


@dataclass(frozen=True)
class Compaction:
    """What ``compact_report`` did.

    Attributes:
        messages: the compacted log, of the input's type: a new list for a list, a
            new dict for a request body, a str for a file's text. With
            ``"summarize"``, the retained messages of a list are the input's own
            objects; the other strategies return the log parsed back from the
            rewritten text. When nothing was compacted, a new list (dict) of the
            input's items.
        strategy: the strategy that ran.
        changed: whether anything was compacted.
        tokens_before, tokens_after: tokens of the live history before and after.
        budget: the budget asked for (for the strategies other than
            ``"summarize"``, also the one ``context_window - max_output`` gives),
            if any.
        met_budget: whether ``tokens_after`` is within the budget (``True``
            without one). The strategies return their best legal result either
            way; ``steps`` says why one stopped short.
        steps: one dict per pipeline stage, with the fields of the CLI's
            ``cutpoint compact --strategy ... --report`` lines (``strategy``,
            ``outcome``: ``"ran"``, ``"no-progress"``, ``"not-triggered"`` or
            ``"stalled"``; for a stage that ran ``tokens_before``,
            ``tokens_after``, ``records_before``, ``records_after``,
            ``cleared_results``, ``cleared_inputs``, ``cleared_thinking``,
            ``invalidated_thinking`` (the thinking blocks and reasoning items
            bound to their prefix that lie after the stage's first edit: the ones
            it invalidates), ``summaries``, ``summarized_calls``, ``dropped_turns``,
            ``dropped_calls`` (the call ids ``truncate`` dropped without a trace),
            ``met_target``, ``left_alone``; for one that could not,
            ``reason``, ``detail``, ``tokens``, ``left_alone``). ``[]`` for
            ``"summarize"``, which is not a pipeline. When the output read back
            over the budget and the pipeline ran again on it, the steps of each
            round follow each other (see ``rounds``).
        rounds: how many times the pipeline ran: 0 when the log met its budget
            already (it comes back unchanged: a compaction of its own output is a
            no-op), 1, or up to 3 when the written
            output read back over the budget and a further round on it could still
            shrink it.
        head: (``"summarize"``) index of the summary message in ``messages`` (the
            end of the pinned head): input messages ``head..cut`` were replaced by
            it. ``None`` for the other strategies.
        cut: (``"summarize"``) index (in the input) of the first retained message.
        summarized_tokens: (``"summarize"``) tokens of the summarized messages.
        ledger: (``"summarize"``) the tool calls the summary covers, in call order.
        summary: (``"summarize"``) the summary message (a dict in the input's
            shape), or ``None``.
        invalidated_thinking: how many thinking blocks and reasoning items the
            output invalidates for their provider's prefix binding (Anthropic
            preserved thinking, OpenAI reasoning items): the provider refuses them
            or drops them. 0 when nothing changed, and with
            ``keep_thinking_valid`` (the default), which strips them.
        simple_compaction: whether keep_thinking_valid wrote a simple compaction
            instead of what the strategy made (its edits changed the prefix of
            thinking that must go back as it was: the current turn's, the latest
            assistant message's): the whole history past the pinned head in one
            summary, every call in its ledger, the next instruction kept when the
            log ends on one. ``head``, ``cut``, ``ledger`` and ``summary`` are then
            ``None`` / ``[]``: the summary is in ``messages``.
        thinking_stripped: (``"summarize"``) whether keep_thinking_valid stripped
            thinking the summary invalidated from the retained messages (so they
            are not the input's own objects).
        calibration: with ``calibrated=True``, the session's fit and the budget
            both ways (``points``, ``scale``, ``overhead``, ``budget_reported``,
            ``budget_estimate``: the CLI's ``--report`` line ``{"calibration":
            ...}``); ``budget`` is then the estimate. ``None`` otherwise.
    """

    messages: Any
    strategy: str
    changed: bool
    tokens_before: int
    tokens_after: int
    budget: Optional[int] = None
    met_budget: bool = True
    steps: List[Dict[str, Any]] = field(default_factory=list)
    rounds: int = 1
    head: Optional[int] = None
    cut: Optional[int] = None
    summarized_tokens: Optional[int] = None
    ledger: List[LedgerEntry] = field(default_factory=list)
    summary: Optional[Dict[str, Any]] = None
    invalidated_thinking: int = 0
    simple_compaction: bool = False
    thinking_stripped: bool = False
    calibration: Optional[Dict[str, Any]] = None


def _unchanged(log: LogLike) -> Any:
    """A log nothing was compacted from, as a new container of the same items."""
    if isinstance(log, (str, bytes)):
        return log
    if isinstance(log, Mapping):
        return dict(log)
    return list(log)


def _rebuild(log: LogLike, fmt: str, result: Dict[str, Any]) -> Any:
    """The compacted log in the input's type."""
    text = result["text"]
    if isinstance(log, (str, bytes)):
        return text
    if fmt == "records":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(log, Mapping) or result["summary"] is None or result["thinking_stripped"]:
        return json.loads(text)
    # The rewrite keeps the head verbatim and the retained messages byte-identical
    # (unless keep_thinking_valid stripped thinking from them: read back above), so
    # the input's own objects stand for them; only the summary is new.
    items = list(log)
    return items[: result["head"]] + [json.loads(result["summary"])] + items[result["cut"] :]


def compact_report(
    messages: LogLike,
    *,
    strategy: str = "summarize",
    budget: Optional[int] = None,
    format: str = "auto",
    token_counter: Optional[TokenCounter] = None,
    **options: Any,
) -> Compaction:
    """Compacts a log with ``strategy`` and says what it did (see ``compact``)."""
    text, fmt = _document(messages, format)
    if budget is not None:
        options["budget"] = budget
    result = _native.compact(text, fmt, strategy, options, token_counter)
    common = dict(
        strategy=strategy,
        changed=result["changed"],
        tokens_before=result["tokens_before"],
        tokens_after=result["tokens_after"],
        budget=result["budget"],
        met_budget=result["met_budget"],
        steps=result["steps"],
        rounds=result["rounds"],
        invalidated_thinking=result["invalidated_thinking"],
        simple_compaction=result["simple_compaction"],
        thinking_stripped=result["thinking_stripped"],
        calibration=result["calibration"],
    )
    if not result["changed"]:
        return Compaction(
            messages=_unchanged(messages),
            head=result["head"],
            cut=result["cut"],
            summarized_tokens=result["summarized_tokens"],
            **common,
        )
    return Compaction(
        messages=_rebuild(messages, fmt, result),
        head=result["head"],
        cut=result["cut"],
        summarized_tokens=result["summarized_tokens"],
        ledger=[LedgerEntry(**u) for u in result["ledger"]],
        summary=json.loads(result["summary"]) if result["summary"] else None,
        **common,
    )


def compact(
    messages: LogLike,
    *,
    strategy: str = "summarize",
    budget: Optional[int] = None,
    format: str = "auto",
    token_counter: Optional[TokenCounter] = None,
    **options: Any,
) -> Any:
    """A compacted copy of a log, never splitting a tool call from its result.

    ``strategy`` names the compaction strategy (``AVAILABLE_STRATEGIES``; the
    same names and options as the CLI's ``cutpoint compact --strategy``):

    - ``"summarize"`` replaces the messages between the pinned head and a legal cut
      by one summary message (in the log's own shape) whose ledger lists every
      covered tool call with its id, tool, arguments verbatim and the first line of
      its result; the retained messages are kept exactly.
    - ``"clear"``: old tool results become a placeholder in place (Anthropic's
      context editing), the most recent ``keep_tool_uses`` kept whole.
    - ``"clear-thinking"``: the thinking/reasoning of finished turns goes.
    - ``"digest"``: each old tool group becomes one ledger message.
    - ``"slide"``: whole oldest user turns go, their calls listed in a ledger.
    - ``"truncate"``: the oldest region goes; the calls it drops are named in the
      step's ``dropped_calls`` (the last resort).
    - ``"pipeline"``: the stages of ``preset`` in order, gentlest first, each
      triggered by a fraction of the budget.

    Options of ``"summarize"``:
        budget: the most tokens the compacted log may hold: the cut moves forward to
            the first legal cut that gets under it (again, larger, if the summary's
            own tokens push it over; at most 8 passes).
        target: instead of a budget, the tokens to compact counted from the start
            (the library's selector: walks back to the nearest legal cut).
        lookback: how far (tokens) the cut may move from the target (default: no
            limit with a budget, 15% of the target with a target).
        keep_head: messages pinned at the front, never compacted (default 0).
        summary: the prose that heads the summary (the CLI's ``--summary``; default
            "Earlier conversation, compacted.", none for records); the ledger always
            follows it.
        direction: ``"back"`` or ``"forward"``, overriding the default above.
        keep_thinking_valid: as for the other strategies (below); default ``True``.
        calibrated: as for the other strategies (below); with ``budget`` only.
        context_window, max_output: instead of ``budget``, the window less the
            output (as for the other strategies).
        shorten_arguments: cut string argument fields longer than this many
            characters in the ledger (never commands, paths or queries).
        summary_tokens: the tokens to count for a records summary (the CLI's
            ``--summary-tokens``); ``ValueError`` on a provider format, whose
            summary message is counted as written.

    Options of the other strategies (every one takes the first five, and ``keep_thinking_valid``):
        budget: the tokens the log should fit in; the strategy stops once it does
            (without one, it does all it may). Required by ``"pipeline"``.
        context_window, max_output: instead of ``budget``, the model's window and
            its output limit (the budget is the difference).
        keep_head: messages (records, for a records log) pinned at the front.
        keep_turns: the most recent user turns always kept (a floor; ``slide`` and
            ``clear-thinking`` keep at least these).
        keep_tool_uses: (clear, pipeline) the most recent tool uses kept whole
            (default 3; the preset's for a pipeline).
        clear_at_least: (clear, pipeline) clear at least this many tokens, or
            nothing at all.
        exclude_tools: (clear, pipeline) tool names whose results are never cleared.
        clear_tool_inputs: (clear, pipeline) ``True`` to clear the cleared calls'
            arguments too, or a list of the tools whose arguments to clear.
        preset: (pipeline) ``"gentle"``, ``"balanced"`` (default) or
            ``"aggressive"``.
        summary: (pipeline) the prose of the summarize stages' summaries (their
            ledger is kept either way).
        keep_thinking_valid: keep every thinking block and reasoning item of a
            provider transcript valid for preserved thinking's prefix binding
            (default ``True``, as the CLI): those the rewrite invalidates are
            stripped; where that would take the current turn's or the latest
            assistant message's thinking, the result is a simple compaction
            (``Compaction.simple_compaction``); where no simple compaction can
            help either (a call still in flight), ``DeferError`` with reason
            ``"thinking_bound"`` (the CLI's exit 3). ``False`` writes what the
            strategy made and counts what it invalidates (``invalidated_thinking``;
            the CLI's ``--allow-invalidated-thinking``).
        calibrated: ``True`` reads the budget in the provider's reported tokens
            (the CLI's ``--calibrated``): the session's fit of cutpoint's estimate
            to the input tokens the file reports (system prompt and tools as an
            overhead, the tokenizer as a scale) turns it into the estimate's units
            (``Compaction.calibration``). Claude Code, Codex and Gemini CLI logs
            that report usage; ``CutpointError`` for a log that reports none, or
            when the overhead alone is over the budget.

    ``token_counter`` counts the input's content blocks; the text a strategy writes
    (placeholders, ledgers, summaries) is counted by it where cutpoint knows the text
    in advance (the cleared-result placeholder, the ``summary`` prose) and by
    cutpoint's estimate (a token per four bytes) otherwise. For a records log the
    records' own ``tokens`` count.

    Returns a value of the input's type: a new list, a new dict, or a str; with the
    same items when the log already fits or nothing can be compacted. With a budget
    the strategies other than ``"summarize"`` return their best legal result even
    when it is over the budget: ``compact_report`` says whether it fits
    (``met_budget``) and why not (``steps``).
    Raises ``DeferError`` when ``"summarize"`` finds no legal cut it can use yet (it
    names the calls it waits for; the other strategies report it as a step with
    reason ``"pending-calls"``), ``FormatError`` when the log cannot be read,
    ``ValueError`` for an unknown strategy or a bad option value, ``TypeError`` for
    an option the strategy does not take (the message lists those it takes) or a
    missing required one. O(len) per pass for ``"summarize"``; O(len) plus the
    strategies' own costs for the others.
    """
    return compact_report(
        messages,
        strategy=strategy,
        budget=budget,
        format=format,
        token_counter=token_counter,
        **options,
    ).messages


def __getattr__(name: str) -> Any:
    # `cutpoint.langchain` as an attribute, imported on first use only.
    if name == "langchain":
        import importlib

        return importlib.import_module(".langchain", __name__)
    raise AttributeError(f"module 'cutpoint' has no attribute {name!r}")


__all__ = [
    "AVAILABLE_STRATEGIES",
    "Anomalies",
    "AppendError",
    "Appended",
    "Compaction",
    "CutpointError",
    "DeferError",
    "Event",
    "EventError",
    "FORMATS",
    "FormatError",
    "Handled",
    "LedgerEntry",
    "LogLike",
    "PendingCall",
    "Record",
    "ReplaceError",
    "STRATEGIES",
    "TokenCounter",
    "Tracker",
    "Violation",
    "__version__",
    "check",
    "compact",
    "compact_report",
    "count_tokens",
    "detect",
    "legal_cuts",
]
