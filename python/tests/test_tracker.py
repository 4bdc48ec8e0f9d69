"""The Tracker binding against the specification's code (transcribed in logs.py) on
random logs: every cut's legality, the selector with its deferrals, streaming, and
refused records that leave the tracker unchanged."""

from __future__ import annotations

import random
from typing import List

import pytest

import cutpoint
from cutpoint import AppendError, DeferError, Event, EventError, Record, ReplaceError, Tracker

from logs import Deferred, Rec, is_legal_cut, select_legal_cut


def random_log(rng: random.Random, n: int) -> List[Rec]:
    """Records a lenient tracker accepts: text, calls with fresh ids, results for
    open calls, and the damage a real log carries (orphan results, results before
    their call, duplicate results, calls left open), with bound records."""
    records: List[Rec] = []
    used: List[str] = []
    answered: set = set()
    early: List[str] = []  # results whose call comes later
    for _ in range(n):
        roll = rng.random()
        bound = rng.random() < 0.2
        tokens = rng.choice([0, 1, 5, 40, 300, 2000])
        open_calls = [c for c in used if c not in answered]
        if roll < 0.25:
            records.append((rng.choice(["user", "assistant"]), tokens, None, bound))
        elif roll < 0.5 or not open_calls:
            pending_early = [e for e in early if e not in used]
            if pending_early and rng.random() < 0.3:
                cid = pending_early[0]
            else:
                cid = f"c{len(used)}_{rng.randint(0, 10**6)}"
            used.append(cid)
            records.append(("tool_use", tokens, cid, bound))
        elif roll < 0.85:
            cid = rng.choice(open_calls)
            answered.add(cid)
            records.append(("tool_result", tokens, cid, bound))
        elif roll < 0.92:
            cid = f"early{len(early)}"
            early.append(cid)
            answered.add(cid)
            records.append(("tool_result", tokens, cid, bound))
        else:
            done = [c for c in used if c in answered] or ["ghost"]
            cid = rng.choice(done)
            answered.add(cid)
            records.append(("tool_result", tokens, cid, bound))
    return records


def to_record(r: Rec) -> Record:
    kind, tokens, cid, bound = r
    return Record(kind, tokens, call_id=cid, bound=bound)


@pytest.mark.parametrize("seed", range(40))
def test_every_cut_and_the_selector_match_the_specification(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(10):
        records = random_log(rng, rng.randint(0, 40))
        t = Tracker()
        for i, r in enumerate(records):
            appended = t.append(to_record(r))
            assert appended.at == i
            assert appended.cut_after_is_legal == is_legal_cut(records[: i + 1], i + 1)
        assert len(t) == len(records)
        assert t.total_tokens == sum(r[1] for r in records)
        legal = [c for c in range(len(records) + 1) if is_legal_cut(records, c)]
        assert t.legal_cuts() == legal
        for c in range(len(records) + 2):
            assert t.is_legal_cut(c) == (c in legal), c
        pending = {r[2] for r in records if r[0] == "tool_use"} - {
            r[2] for r in records if r[0] == "tool_result"
        }
        assert {p.call_id for p in t.pending_calls()} == pending
        total = t.total_tokens
        targets = sorted({0, 1, total // 3, total // 2, total - 1, total, total + 7} - {-1})
        for target in targets:
            for lookback in (0, 50, 10**9):
                try:
                    want = select_legal_cut(records, target, lookback)
                except Deferred as d:
                    with pytest.raises(DeferError) as got:
                        t.select_legal_cut(target, lookback)
                    facts = got.value.facts()
                    assert facts["reason"] == "no_legal_cut"
                    for k, v in d.facts.items():
                        assert facts[k] == v, (k, records, target, lookback)
                else:
                    assert t.select_legal_cut(target, lookback) == want


def test_the_readme_example() -> None:
    log = Tracker()
    log.append(Record.user(1_000))
    log.append(Record.assistant(200))
    log.append(Record.tool_use("call_1", 50))
    log.append(Record.tool_result("call_1", 4_000))
    log.append(Record.assistant(80))
    log.append(Record.tool_use("call_2", 50).bound_to_previous())
    assert log.select_legal_cut(3_000, 5_000) == 2
    assert log.select_legal_cut(2**64 - 1, 5_000) == 4
    with pytest.raises(DeferError) as defer:
        log.select_legal_cut(2**64 - 1, 10)
    assert defer.value.waiting_on == ["call_2"]
    assert defer.value.nearest_legal_below == 4
    assert [(p.call_id, p.at) for p in log.pending_calls()] == [("call_2", 5)]


@pytest.mark.parametrize("seed", range(10))
def test_streaming_equals_appending(seed: int) -> None:
    rng = random.Random(1000 + seed)
    records = random_log(rng, 40)
    appended, streamed = Tracker(), Tracker()
    for r in records:
        appended.append(to_record(r))
        rec = to_record(r)
        if rng.random() < 0.5:
            streamed.handle(Event.record(rec))
            continue
        opened = streamed.handle(Event.opened(Record(r[0], 0, call_id=r[2], bound=r[3])))
        assert opened.kind == "opened" and opened.cut_after_is_legal is False
        # While open, no cut after the open record is legal.
        assert not streamed.is_legal_cut(len(streamed))
        assert streamed.open_record == len(streamed) - 1
        left = r[1]
        while left:
            step = rng.randint(1, left)
            streamed.handle(Event.delta(step))
            left -= step
        if rng.random() < 0.3:
            assert streamed.handle(Event.usage_reported(r[1])).kind == "resized"
        closed = streamed.handle(Event.closed())
        assert closed.kind == "closed"
        assert streamed.legal_cuts() == appended.legal_cuts()
    assert streamed.legal_cuts() == appended.legal_cuts()
    assert streamed.total_tokens == appended.total_tokens
    assert [p.call_id for p in streamed.pending_calls()] == [
        p.call_id for p in appended.pending_calls()
    ]
    ended = streamed.handle(Event.turn_ended())
    assert (ended.kind, ended.len, ended.pending) == (
        "turn_ended",
        len(records),
        appended.pending_count,
    )


def snapshot(t: Tracker) -> tuple:
    return (len(t), t.total_tokens, t.legal_cuts(), [(p.call_id, p.at) for p in t.pending_calls()])


def test_a_refused_record_changes_nothing_and_names_its_facts() -> None:
    t = Tracker()
    t.extend([Record.user(10), Record.tool_use("a", 5), Record.tool_result("a", 7), Record.tool_use("b", 3)])
    before = snapshot(t)
    with pytest.raises(AppendError) as e:
        t.append(Record.tool_use("b", 1))
    assert (e.value.variant, e.value.at, e.value.call_id, e.value.first_use) == ("duplicate_call", 4, "b", 3)
    with pytest.raises(AppendError) as e:
        t.append(Record.tool_use("a", 1))
    assert (e.value.variant, e.value.call_id, e.value.first_use) == ("duplicate_call", "a", None)
    with pytest.raises(AppendError) as e:
        t.append(Record.tool_use("", 1))
    assert (e.value.variant, e.value.record_kind) == ("empty_call_id", "tool_use")
    with pytest.raises(AppendError) as e:
        t.append(Record.summary(["a"], 4))
    assert (e.value.variant, e.value.call_id) == ("covered_id_seen", "a")
    with pytest.raises(AppendError) as e:
        t.append(Record.user(2**64 - 1))
    assert (e.value.variant, e.value.tokens, e.value.total) == ("token_overflow", 2**64 - 1, 25)
    assert snapshot(t) == before
    assert isinstance(e.value, cutpoint.CutpointError)


def test_strict_mode_refuses_pairing_violations_with_their_positions() -> None:
    t = Tracker(strict=True)
    assert t.strict
    with pytest.raises(AppendError) as e:
        t.append(Record.tool_result("ghost", 5))
    assert (e.value.variant, e.value.violation, e.value.call_id, e.value.at) == (
        "violation",
        "orphan_result",
        "ghost",
        0,
    )
    assert len(t) == 0
    t.extend([Record.tool_use("a", 1), Record.tool_result("a", 1)])
    with pytest.raises(AppendError) as e:
        t.append(Record.tool_result("a", 1))
    assert (e.value.violation, e.value.at) == ("duplicate_result", 2)
    lenient = Tracker()
    got = lenient.append(Record.tool_result("ghost", 5))
    assert got.anomaly == "orphan_result"
    assert lenient.append(Record.tool_use("ghost", 1)).anomaly == "use_after_result"
    assert lenient.anomalies.orphan_results == 1 and lenient.anomalies.uses_after_result == 1


def test_caps_refuse_what_passes_them() -> None:
    t = Tracker(max_records=2, max_call_id_bytes=4)
    t.append(Record.user(1))
    with pytest.raises(AppendError) as e:
        t.append(Record.tool_use("toolong", 1))
    assert (e.value.variant, e.value.limit, e.value.max, e.value.value) == (
        "limit_exceeded",
        "max_call_id_bytes",
        4,
        7,
    )
    t.append(Record.user(1))
    with pytest.raises(AppendError) as e:
        t.append(Record.user(1))
    assert (e.value.limit, e.value.max, e.value.value, e.value.at) == ("max_records", 2, 3, 2)


def test_event_errors_carry_their_facts() -> None:
    t = Tracker()
    with pytest.raises(EventError) as e:
        t.handle(Event.delta(3))
    assert (e.value.variant, e.value.event, e.value.len) == ("not_open", "delta", 0)
    with pytest.raises(EventError) as e:
        t.set_last_tokens(3)
    assert (e.value.variant, e.value.tokens) == ("empty_log", 3)
    t.open(Record.assistant(0))
    with pytest.raises(AppendError) as a:
        t.append(Record.user(1))
    assert (a.value.variant, a.value.open_at) == ("record_open", 0)
    with pytest.raises(EventError) as e:
        t.handle(Event.turn_ended())
    assert (e.value.variant, e.value.open_at) == ("turn_ended_while_open", 0)
    assert t.grow(5) == 5
    assert t.close() is True


def test_replace_region_and_its_errors() -> None:
    t = Tracker()
    t.extend([Record.user(100), Record.tool_use("a", 10), Record.tool_result("a", 500), Record.user(50)])
    with pytest.raises(ReplaceError) as e:
        t.replace_region(0, 2, 5)
    assert (e.value.variant, e.value.at, e.value.which) == ("not_a_legal_cut", 2, "end")
    with pytest.raises(ReplaceError) as e:
        t.replace_region(0, 9, 5)
    assert (e.value.variant, e.value.end, e.value.len) == ("out_of_range", 9, 4)
    t.replace_region(0, 3, 5)
    assert (len(t), t.total_tokens, t.legal_cuts()) == (2, 55, [0, 1, 2])
    # The summary covers the call: a second tool_use with its id is refused.
    with pytest.raises(AppendError):
        t.append(Record.tool_use("a", 1))


def test_records_are_values_and_check_their_shape() -> None:
    r = Record("tool_use", 5, call_id="a", bound=True)
    assert (r.kind, r.tokens, r.call_id, r.bound) == ("tool_use", 5, "a", True)
    assert r == Record.tool_use("a", 5).bound_to_previous()
    assert "call_id=\"a\"" in repr(r)
    assert Record.summary(["x", "y"], 3).covers == ["x", "y"]
    with pytest.raises(ValueError, match="needs a call_id"):
        Record("tool_result", 1)
    with pytest.raises(ValueError, match="unknown record kind"):
        Record("tool", 1)
    with pytest.raises(ValueError):
        Record("user", 1, call_id="a")
    with pytest.raises(OverflowError):
        Record.user(-1)
    with pytest.raises(TypeError):
        Tracker().extend([Record.user(1), "not a record"])
