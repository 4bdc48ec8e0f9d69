"""cutpoint against LangChain's own context tools, in one Python process, on the same
generated agent logs: LangChain's ``trim_messages`` (as its docs show it, and without
``start_on``) and ``ClearToolUsesEdit`` (the ``ContextEditingMiddleware`` edit of
langchain v1), against ``cutpoint.compact`` (strategy ``summarize``, and strategy
``clear``, cutpoint's counterpart of ``ClearToolUsesEdit``) on OpenAI Chat dicts and
through ``cutpoint.langchain`` on the same ``BaseMessage`` list.

Each tool is asked to bring a log of N messages (10^2 .. 10^5) down to half its tokens.
For each: the broken pairs of its output (counted by ``cutpoint.check``: tool messages
whose call is gone, calls whose results are gone), how many of its outputs are broken
when it is asked for 10%, 20%, .. 90% of the tokens instead (where one cut lands is a
matter of chance), the tokens it kept (one counter for all, LangChain's
``count_tokens_approximately``, as a share of the input), and the median time per call.
Seeded; nothing is timed but the call itself.

    pip install ./python "langchain>=1,<2"
    python python/bench/bench_langchain.py            # sizes 100,1000,10000,100000
    python python/bench/bench_langchain.py --sizes 100,1000 --min-seconds 0.2
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from langchain.agents.middleware import ClearToolUsesEdit
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

import cutpoint
import cutpoint.langchain as cl

VOCAB = ["alpha", "beta", "gamma", "delta", "pytest", "src/lib.rs", "ok", "failed", "cargo"]


def words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(lo, hi)))


def agent_log(n: int, seed: int = 7) -> List[BaseMessage]:
    """About ``n`` messages of a tool-using agent: a system prompt, then user turns,
    each with 0-3 rounds of 1-4 parallel tool calls (results in any order, outputs of
    a few to a few hundred words) and a closing answer. Every call is answered."""
    rng = random.Random(seed)
    out: List[BaseMessage] = [SystemMessage("You are a coding agent. " + words(rng, 5, 20))]
    call = 0
    while len(out) < n:
        turn: List[BaseMessage] = [HumanMessage(words(rng, 3, 60))]
        for _ in range(rng.randint(0, 3)):
            calls = []
            for _ in range(rng.randint(1, 4)):
                call += 1
                calls.append(
                    {"name": rng.choice(["bash", "read_file", "grep"]),
                     "args": {"command": words(rng, 1, 8)}, "id": f"call_{call:07d}"}
                )
            turn.append(AIMessage(content=words(rng, 0, 15), tool_calls=calls))
            answered = list(calls)
            rng.shuffle(answered)
            turn += [
                ToolMessage(words(rng, 5, 400), tool_call_id=c["id"], name=c["name"])
                for c in answered
            ]
        turn.append(AIMessage(words(rng, 5, 80)))
        if len(out) + len(turn) > n and len(out) > 1:
            break
        out += turn
    return out


def broken_pairs(messages: Sequence[BaseMessage]) -> int:
    """Violations of the OpenAI Chat tool-call rules (cutpoint's check), counted."""
    return len(cl.check(messages))


def timed(run: Callable[[], Any], min_seconds: float, max_runs: int = 7) -> tuple:
    """The median seconds of ``run`` over at least one run, more while under
    ``min_seconds`` in total (at most ``max_runs``), and its last result."""
    times: List[float] = []
    result = None
    while not times or (sum(times) < min_seconds and len(times) < max_runs):
        t0 = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def fmt_time(seconds: Optional[float]) -> str:
    if seconds is None:
        return "—"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


#: The shares of its tokens each log is also brought down to, to count how many
#: outputs come out broken (where a tool's one cut lands is a matter of chance).
SWEEP = [k / 10 for k in range(1, 10)]


def tools(messages: List[BaseMessage], dicts: List[Dict[str, Any]], n: int,
          quadratic_limit: int) -> List[tuple]:
    """``(name, run(share) -> output or None, output kind)`` for each tool: ``run``
    brings the log to ``share`` of its tokens in the tool's own count (``None``: not
    run at this size)."""
    total = count_tokens_approximately(messages)
    cp_total = cutpoint.count_tokens(dicts, "openai-chat")

    def trim(share: float, **kw: Any) -> List[BaseMessage]:
        return trim_messages(messages, max_tokens=int(total * share), strategy="last",
                             token_counter=count_tokens_approximately,
                             include_system=True, **kw)

    return [
        ("cutpoint.compact (dicts)", lambda share: cutpoint.compact(
            dicts, budget=int(cp_total * share), format="openai-chat", keep_head=1), "dicts"),
        ("cutpoint.langchain.compact", lambda share: cl.compact(
            messages, budget=int(cp_total * share), keep_head=1), "messages"),
        ("cutpoint clear (dicts, budget)", lambda share: cutpoint.compact(
            dicts, strategy="clear", keep_tool_uses=3, budget=int(cp_total * share),
            format="openai-chat", keep_head=1), "dicts"),
        ("cutpoint.langchain clear (budget)", lambda share: cl.compact(
            messages, strategy="clear", keep_tool_uses=3, budget=int(cp_total * share),
            keep_head=1), "messages"),
        ("cutpoint clear (dicts, no budget)", lambda share: cutpoint.compact(
            dicts, strategy="clear", keep_tool_uses=3, format="openai-chat", keep_head=1),
         "dicts"),
        ("trim_messages, docs' settings", lambda share: trim(
            share, start_on="human", end_on=("human", "tool")), "messages"),
        ("trim_messages, no start_on", lambda share: trim(share), "messages"),
        ("ClearToolUsesEdit (keep=3)", lambda share: clear(
            messages, int(total * share), 0), "messages"),
        ("ClearToolUsesEdit (clear_at_least)", lambda share: clear(
            messages, int(total * share), total - int(total * share))
         if n <= quadratic_limit else None, "messages"),
    ]


def bench(sizes: Sequence[int], min_seconds: float, quadratic_limit: int,
          sweep_limit: int) -> List[Dict[str, Any]]:
    rows = []
    for n in sizes:
        messages = agent_log(n)
        dicts = cl.to_openai_dicts(messages)
        total = count_tokens_approximately(messages)
        for name, run, kind in tools(messages, dicts, n, quadratic_limit):
            seconds, out = timed(lambda: run(0.5), min_seconds)
            if out is None:
                rows.append({"n": len(messages), "tool": name, "skipped": True})
                continue

            def as_messages(out: Any) -> List[BaseMessage]:
                return convert_to_messages(out) if kind == "dicts" else out

            out_messages = as_messages(out)
            row = {
                "n": len(messages),
                "tool": name,
                "broken": broken_pairs(out_messages),
                "kept_tokens": count_tokens_approximately(out_messages),
                "total_tokens": total,
                "kept_messages": len(out_messages),
                "seconds": seconds,
            }
            # The quadratic edit is swept only on small logs.
            if "clear_at_least" not in name or n <= sweep_limit:
                broken = [broken_pairs(as_messages(run(share))) for share in SWEEP]
                row["broken_outputs"] = sum(b > 0 for b in broken)
                row["broken_in_sweep"] = sum(broken)
            rows.append(row)
            print(f"  {len(messages):>7} {name:<36} {fmt_time(seconds)}", file=sys.stderr)
    return rows


def clear(messages: List[BaseMessage], trigger: int, clear_at_least: int) -> List[BaseMessage]:
    edited = list(messages)  # the edit replaces list items; the messages stay shared
    ClearToolUsesEdit(trigger=trigger, keep=3, clear_at_least=clear_at_least).apply(
        edited, count_tokens=count_tokens_approximately
    )
    return edited


def table(rows: List[Dict[str, Any]]) -> str:
    lines = [
        "| messages | tool | broken pairs | broken outputs at 10%..90% | tokens kept "
        "| messages kept | time per call |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"| {r['n']:,} | {r['tool']} | — | — | — | — | not run (quadratic) |")
            continue
        share = 100 * r["kept_tokens"] / r["total_tokens"]
        swept = (
            f"{r['broken_outputs']} of {len(SWEEP)} ({r['broken_in_sweep']} pairs)"
            if "broken_outputs" in r else "not run"
        )
        lines.append(
            f"| {r['n']:,} | {r['tool']} | {r['broken']} | {swept} | {share:.0f}% | "
            f"{r['kept_messages']:,} | {fmt_time(r['seconds'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="repeat each call while under this total (median reported)")
    parser.add_argument("--quadratic-limit", type=int, default=10_000,
                        help="largest log for ClearToolUsesEdit with clear_at_least, "
                             "which re-counts the whole log after each clear")
    parser.add_argument("--sweep-limit", type=int, default=1_000,
                        help="largest log the quadratic edit is swept over budgets on")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = bench(sizes, args.min_seconds, args.quadratic_limit, args.sweep_limit)
    import langchain
    import langchain_core

    print(
        f"cutpoint {cutpoint.__version__}, langchain {langchain.__version__}, "
        f"langchain-core {langchain_core.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}"
    )
    print(table(rows))
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
