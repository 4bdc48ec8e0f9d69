"""Type stubs of cutpoint's native module (Rust, PyO3). Import from ``cutpoint``."""

from typing import Any, Callable, Dict, Iterable, List, Literal, Optional

__version__: str
#: Every strategy name ``compact`` knows.
STRATEGIES: List[str]
#: The strategies this version implements: all of ``STRATEGIES``.
AVAILABLE_STRATEGIES: List[str]

RecordKind = Literal["user", "assistant", "tool_use", "tool_result", "summary"]
AnomalyName = Literal["orphan_result", "duplicate_result", "use_after_result"]

class Record:
    """One record of a log: a kind, a token count, the call id of a tool record, and
    whether it is bound to the record before it (the same provider message: no cut
    between them). Immutable; compares by value."""

    def __init__(
        self,
        kind: RecordKind,
        tokens: int,
        call_id: Optional[str] = None,
        bound: bool = False,
        covers: Optional[List[str]] = None,
    ) -> None:
        """Tool records need ``call_id``, other kinds refuse it; a summary lists the
        call ids it ``covers``. Raises ``ValueError`` otherwise."""
    @staticmethod
    def user(tokens: int) -> Record:
        """A user turn (or any input that is not a tool result)."""
    @staticmethod
    def assistant(tokens: int) -> Record:
        """Assistant output that is not a tool call."""
    @staticmethod
    def tool_use(call_id: str, tokens: int) -> Record:
        """A tool call with id ``call_id``."""
    @staticmethod
    def tool_result(call_id: str, tokens: int) -> Record:
        """The result of the call ``call_id``."""
    @staticmethod
    def summary(covers: List[str], tokens: int) -> Record:
        """A summary of a compacted region, covering the calls ``covers`` as whole
        pairs."""
    def bound_to_previous(self) -> Record:
        """The same record, bound to the one before it."""
    @property
    def kind(self) -> RecordKind: ...
    @property
    def tokens(self) -> int: ...
    @property
    def call_id(self) -> Optional[str]: ...
    @property
    def bound(self) -> bool: ...
    @property
    def covers(self) -> List[str]: ...

class Event:
    """One step of a live turn, for ``Tracker.handle``:
    ``opened(record) -> delta(tokens)* -> closed() -> ... -> turn_ended()``."""

    @staticmethod
    def record(record: Record) -> Event:
        """A complete record in one piece."""
    @staticmethod
    def opened(record: Record) -> Event:
        """A record starts streaming (a tool call is pending from here on)."""
    @staticmethod
    def delta(tokens: int) -> Event:
        """The open record grew by ``tokens``."""
    @staticmethod
    def closed() -> Event:
        """The open record is complete."""
    @staticmethod
    def usage_reported(tokens: int) -> Event:
        """The provider reported the exact size of the last record."""
    @staticmethod
    def turn_ended() -> Event:
        """The model's turn ended; no record may be left open."""
    @staticmethod
    def call_withdrawn(call_id: str) -> Event:
        """The provider dropped the pending call ``call_id`` (an Anthropic ``fallback``
        block): it waits for no result any more."""
    @property
    def kind(
        self,
    ) -> Literal[
        "record", "opened", "delta", "closed", "usage_reported", "turn_ended", "call_withdrawn", "other"
    ]: ...
    @property
    def tokens(self) -> Optional[int]:
        """The tokens of a ``delta`` or ``usage_reported`` event."""

class Appended:
    """What an accepted append (or open) did."""

    @property
    def at(self) -> int:
        """The record's position."""
    @property
    def cut_after_is_legal(self) -> bool:
        """Whether cut ``at + 1`` is legal now."""
    @property
    def anomaly(self) -> Optional[AnomalyName]:
        """What was unusual about the record (a lenient tracker accepts it)."""
    @property
    def first_result(self) -> Optional[int]:
        """For ``use_after_result``: position of the earlier result."""

class Handled:
    """What ``Tracker.handle`` did; fields that do not apply to ``kind`` are ``None``."""

    @property
    def kind(
        self,
    ) -> Literal["appended", "opened", "grew", "closed", "resized", "turn_ended"]: ...
    @property
    def at(self) -> Optional[int]: ...
    @property
    def cut_after_is_legal(self) -> Optional[bool]: ...
    @property
    def tokens(self) -> Optional[int]: ...
    @property
    def anomaly(self) -> Optional[AnomalyName]: ...
    @property
    def len(self) -> Optional[int]: ...
    @property
    def pending(self) -> Optional[int]: ...

class PendingCall:
    """A call whose ``tool_use`` was appended and whose ``tool_result`` was not."""

    @property
    def call_id(self) -> str: ...
    @property
    def at(self) -> int:
        """Position of its ``tool_use``."""

class Anomalies:
    """Counts of the anomalies a lenient tracker accepted."""

    @property
    def orphan_results(self) -> int: ...
    @property
    def duplicate_results(self) -> int: ...
    @property
    def uses_after_result(self) -> int: ...

class Tracker:
    """An incremental index of the legal compaction cuts of a conversation log.

    Cut ``c`` (``0 <= c <= len``) keeps records ``c..`` and compacts ``..c``. It is
    legal when every ``tool_use`` before ``c`` has its ``tool_result`` before ``c``,
    no ``tool_result`` before ``c`` answers a ``tool_use`` at or after ``c``, and
    record ``c`` is not bound to record ``c - 1``. Appends are O(1) amortized, the
    selector O(log n). A refused record or event (an exception) leaves the tracker
    unchanged. Each method runs to its end under the GIL, so threads sharing a tracker
    take turns.
    """

    def __init__(
        self,
        *,
        strict: bool = False,
        max_records: Optional[int] = None,
        max_open_calls: Optional[int] = None,
        max_call_id_bytes: Optional[int] = None,
    ) -> None:
        """``strict=True`` refuses orphan and duplicate results and calls after their
        result (``AppendError`` with ``variant="violation"``) instead of counting them
        in ``anomalies``."""
    def append(self, record: Record) -> Appended:
        """Appends one finished record. O(1) amortized. Raises ``AppendError``."""
    def extend(self, records: Iterable[Record]) -> int:
        """Appends ``records`` in order; returns how many. On a refused record raises
        its ``AppendError`` (its ``at`` says which); the ones before it stay."""
    def open(self, record: Record) -> Appended:
        """Opens a streaming record; no cut after it is legal until it closes."""
    def grow(self, tokens: int) -> int:
        """The open record grew by ``tokens``; returns its size. Raises
        ``EventError``."""
    def close(self) -> bool:
        """Closes the open record; returns whether the cut after it is legal now."""
    def set_last_tokens(self, tokens: int) -> None:
        """A provider's usage report: the last record counts ``tokens``."""
    def handle(self, event: Event) -> Handled:
        """Handles one event of a live turn. Raises ``EventError`` or
        ``AppendError``."""
    def select_legal_cut(self, target_tokens: int, lookback_tokens: int) -> int:
        """The largest legal cut at or before the record where the prefix sum reaches
        ``target_tokens``, at most ``lookback_tokens`` back. O(log n). Raises
        ``DeferError`` naming the calls it waits for."""
    def select_legal_cut_forward(self, target_tokens: int, lookahead_tokens: int) -> int:
        """The smallest legal cut compacting at least ``target_tokens`` and at most
        ``lookahead_tokens`` more. O(log n). Raises ``DeferError``."""
    def is_legal_cut(self, cut: int) -> bool:
        """Whether cut ``cut`` splits no pair. O(1)."""
    def legal_cut_at_or_before(self, pos: int) -> int: ...
    def legal_cut_at_or_after(self, pos: int) -> Optional[int]: ...
    def legal_cuts(self) -> List[int]:
        """Every legal cut, increasing."""
    def pending_calls(self) -> List[PendingCall]:
        """The calls still waiting for their result, in log order."""
    def replace_region(self, start: int, end: int, summary_tokens: int) -> None:
        """Replaces records ``start..end`` (both legal cuts) by one summary record.
        Raises ``ReplaceError``."""
    def tokens_before(self, cut: int) -> Optional[int]: ...
    def record_tokens(self, index: int) -> Optional[int]: ...
    @property
    def total_tokens(self) -> int: ...
    @property
    def pending_count(self) -> int: ...
    @property
    def open_record(self) -> Optional[int]: ...
    @property
    def strict(self) -> bool: ...
    @property
    def anomalies(self) -> Anomalies: ...
    def __len__(self) -> int: ...

class Violation:
    """One broken provider rule. ``str(v)`` is the CLI's line:
    ``LINE: rule: call_id text``."""

    @property
    def rule(self) -> str:
        """The rule's short name, e.g. ``"anthropic/tool-use-without-result"``."""
    @property
    def message(self) -> int:
        """Index of the message that breaks it (0-based)."""
    @property
    def line(self) -> int:
        """1-based line of the input where that message starts."""
    @property
    def call_id(self) -> Optional[str]: ...
    @property
    def pending_at_end(self) -> bool:
        """For an unanswered call: still in flight at the very end of the log."""
    @property
    def text(self) -> str:
        """The provider's error text for it."""
    @property
    def display(self) -> str: ...

def check(text: str, format: str = "auto") -> List[Violation]: ...
def legal_cuts(text: str, format: str = "auto") -> List[int]: ...
def detect(text: str) -> str: ...
def count_tokens(
    text: str, format: str = "auto", token_counter: Optional[Callable[[str], int]] = None
) -> int: ...
def compact(
    text: str,
    format: str = "auto",
    strategy: str = "summarize",
    options: Optional[Dict[str, Any]] = None,
    token_counter: Optional[Callable[[str], int]] = None,
) -> Dict[str, Any]:
    """Compacts ``text`` with ``strategy`` (``clear``, ``clear-thinking``, ``digest``,
    ``summarize``, ``slide``, ``truncate``, ``pipeline``) and ``options`` (see
    ``cutpoint.compact``). The dict: ``strategy``, ``changed``, ``text`` (``None``
    when unchanged), ``budget``, ``tokens_before``, ``tokens_after``, ``met_budget``,
    ``rounds``, ``steps`` (the CLI's ``--report`` fields, one dict per stage and round; ``[]`` for
    ``summarize``), and for ``summarize`` ``head``, ``cut``, ``summarized_tokens``,
    ``ledger``, ``summary`` (``None``/``[]`` for the others), and ``calibration``
    (with the option ``calibrated``: the fit and the budget both ways; else ``None``)."""
    ...
