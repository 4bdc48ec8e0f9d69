"""The exceptions cutpoint raises, each carrying the facts of the Rust error it stands
for (positions, call ids, lines), as attributes.

The native module builds them as ``Class(message, **facts)``; every fact a class
names is an attribute, ``None`` when the variant does not have it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Tuple


def _rebuild(cls: type, message: str, facts: Dict[str, Any]) -> "CutpointError":
    return cls(message, **facts)


class CutpointError(Exception):
    """Base class of every error cutpoint raises (a ``FormatError`` is also a
    ``ValueError``).

    ``message`` is the library's text for the error; the facts are attributes.
    """

    _FACTS: ClassVar[Tuple[str, ...]] = ()

    def __init__(self, message: str, **facts: Any) -> None:
        super().__init__(message)
        self.message = message
        unknown = set(facts) - set(self._FACTS)
        if unknown:
            raise TypeError(
                f"{type(self).__name__} has no fact {sorted(unknown)[0]!r}; "
                f"it has: {', '.join(self._FACTS) or 'none'}"
            )
        for name in self._FACTS:
            setattr(self, name, facts.get(name))

    def facts(self) -> Dict[str, Any]:
        """The error's facts as a dict (every fact the class names)."""
        return {name: getattr(self, name) for name in self._FACTS}

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.message, self.facts()))


class DeferError(CutpointError):
    """No legal cut can be used yet: compaction should wait for the turn boundary.

    Deferring is always safe; an illegal cut never is.

    Facts:
        reason: ``"no_legal_cut"`` (every cut in the window would split a pair or a
            call still in flight), ``"head_open"`` (the pinned head does not end at a
            legal cut yet) or ``"thinking_bound"`` (keep_thinking_valid: the
            compaction would change the prefix of the current turn's or the latest
            assistant message's thinking, and no simple compaction keeps it valid,
            because a call is still in flight or a kept item stands between;
            ``message_index`` and ``line`` name it).
        message_index, line: the message of the output, and its 1-based line,
            whose thinking is bound (``thinking_bound``).
        target_tokens, lookback_tokens: what was asked (``no_legal_cut``).
        target_index, floor: the highest and lowest cut searched (``no_legal_cut``).
        nearest_legal_below: the nearest legal cut below ``floor``, if any.
        nearest_legal_above: the nearest legal cut above ``target_index``, if one exists
            yet.
        waiting_on: the ids of the calls still unanswered before the cut that was
            wanted, in log order (a list; empty when only completed pairs straddle the
            window).
        keep_head: the pinned head asked for (``head_open``).
    """

    _FACTS = (
        "reason",
        "target_tokens",
        "lookback_tokens",
        "target_index",
        "floor",
        "nearest_legal_below",
        "nearest_legal_above",
        "waiting_on",
        "keep_head",
        "message_index",
        "line",
    )

    def __init__(self, message: str, **facts: Any) -> None:
        super().__init__(message, **facts)
        self.waiting_on = list(self.waiting_on or ())


class FormatError(CutpointError, ValueError):
    """The input could not be read in the format asked for (or the format could not be
    told).

    Facts:
        line: the 1-based line of the input where the fault is (``None`` when the
            format could not be told). For a list of messages serialized as one JSON
            document, line 1 is the document; the detail names the message index.
        detail: what is wrong.
    """

    _FACTS = ("line", "detail")


class AppendError(CutpointError):
    """The tracker refused a record; it is unchanged.

    Facts (``None`` where the variant has none):
        variant: ``duplicate_call``, ``covered_id_seen``, ``empty_call_id``,
            ``token_overflow``, ``record_open``, ``limit_exceeded``, ``violation``
            (strict mode), ``full``.
        at: the position the refused record would have taken.
        call_id: the id concerned (``duplicate_call``, ``covered_id_seen``,
            ``violation``).
        first_use: position of the first ``tool_use`` with that id while it is still
            pending (``duplicate_call``).
        record_kind: ``tool_use``, ``tool_result`` or ``summary`` (``empty_call_id``).
        tokens, total: the record's tokens and the log's total (``token_overflow``).
        open_at: position of the open record (``record_open``).
        limit, max, value: the ``Limits`` field, its cap and what the record would have
            made it (``limit_exceeded``).
        violation: ``orphan_result``, ``duplicate_result`` or ``use_after_result``
            (``violation``).
        first_result: position of the earlier result, when known (``violation``).
    """

    _FACTS = (
        "variant",
        "at",
        "call_id",
        "first_use",
        "record_kind",
        "tokens",
        "total",
        "open_at",
        "limit",
        "max",
        "value",
        "violation",
        "first_result",
    )


class EventError(CutpointError):
    """The tracker refused an event of a live turn; it is unchanged. (A refused record
    inside an event raises ``AppendError``.)

    Facts:
        variant: ``not_open``, ``turn_ended_while_open``, ``empty_log``,
            ``token_overflow``.
        event: ``delta`` or ``close`` (``not_open``).
        len: records in the log (``not_open``).
        open_at: position of the open record (``turn_ended_while_open``).
        tokens: the size reported or added (``empty_log``, ``token_overflow``).
        at, before: the record, and the tokens before it (``token_overflow``).
    """

    _FACTS = ("variant", "event", "len", "open_at", "tokens", "at", "before")


class ReplaceError(CutpointError):
    """``Tracker.replace_region`` refused a region; the tracker is unchanged.

    Facts:
        variant: ``not_a_legal_cut``, ``empty_region``, ``out_of_range``,
            ``token_overflow``.
        at, which: the position and which end (``start`` or ``end``) is not a legal
            cut.
        start, end: the empty region; ``end`` and ``len`` for ``out_of_range``.
        summary_tokens, kept: the summary's tokens and those kept (``token_overflow``).
    """

    _FACTS = ("variant", "at", "which", "start", "end", "len", "summary_tokens", "kept")


__all__ = [
    "AppendError",
    "CutpointError",
    "DeferError",
    "EventError",
    "FormatError",
    "ReplaceError",
]
