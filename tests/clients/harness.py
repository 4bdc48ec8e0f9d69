#!/usr/bin/env python3
"""Real clients resume cutpoint's rewrites, offline.

For every real Claude Code, Codex and Gemini CLI session in tests/fixtures/transcripts/ and
tests/fixtures/clients/, and every route (the file as it is, `--target`, each `--strategy`, and
`--strategy pipeline` with each preset), this:

1. rewrites the session with the cutpoint CLI at a size that forces work,
2. puts the rewrite where the pinned client looks for sessions, in a temporary HOME,
3. resumes it non-interactively against a loopback stand-in for the provider API (standin.py)
   that records the request and answers a minimal streamed reply,
4. checks: the client exits 0 and sends one request (accepted); every line of text in the
   records cutpoint wrote or edited reaches the request (summary delivered); the records after
   the last one cutpoint wrote reach it too, their call ids in order (tail verbatim); and the
   request keeps the provider's pairing and reasoning rules (checks.py).

Cases that fail today because of known cutpoint writer bugs are listed in KNOWN_FAILURES; the
list is strict: a listed case that passes fails the run, so the list must shrink with each fix.
Any other failure fails the run. A client that cannot be installed fails the run.

Usage: python3 tests/clients/harness.py [--cutpoint BIN] [--jobs N] [--only SUBSTRING] [--keep]
(scripts/clients.sh builds the CLI and runs this.)
"""

from __future__ import annotations

import argparse
from collections import Counter
import concurrent.futures as cf
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

import checks  # noqa: E402
import sessions  # noqa: E402
from standin import REPLY_TEXT, Recorder  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_DIRS = [ROOT / "tests/fixtures/transcripts", ROOT / "tests/fixtures/clients"]

# The pinned clients: npm package, version, the client's name in the table.
CLIENTS = {
    "claude-code": ("@anthropic-ai/claude-code", "2.1.328", "Claude Code"),
    "codex": ("@openai/codex", "0.169.0", "Codex CLI"),
    "gemini-cli": ("@google/gemini-cli", "0.61.0", "Gemini CLI"),
}
PREFIX = {"claude-code__": "claude-code", "codex__": "codex", "gemini-cli-session__": "gemini-cli"}

# Routes: (name, cutpoint arguments before the budget). "original" is the control: the file as
# it is, so a client's own limits on a fixture show apart from what a rewrite does.
STRATEGIES = ["clear", "clear-thinking", "digest", "summarize", "slide", "truncate"]
PRESETS = ["gentle", "balanced", "aggressive"]
# Every route keeps thinking valid (cutpoint's default: the thinking a rewrite invalidates
# stripped, or a simple compaction where that would take the current turn's; exit 3 with a
# call in flight). `+allow-invalidated-thinking`: the same strategy written as it made it
# (`--allow-invalidated-thinking`, for a caller that sends it with `drop_block`).
ALLOW = "+allow-invalidated-thinking"
# `target+allow-invalidated-thinking`: one summary at the target, the same way.
# `target+keep-head`: `--target` with the first message pinned (`--keep-head 1`): the head stays
# live, the summary an ordinary user record after it.
KEEP_HEAD = "+keep-head"
ROUTES = (["original", "target", f"target{KEEP_HEAD}", f"target{KEEP_HEAD}{ALLOW}", f"target{ALLOW}"] + STRATEGIES + [f"pipeline:{p}" for p in PRESETS]
          + [f"summarize{ALLOW}", f"pipeline:balanced{ALLOW}"])
# Sizes tried, as fractions of the file's tokens, first to last; the first that cutpoint can meet
# (exit 0) and that changes the file is used. For --target it is the share compacted.
BUDGETS = [0.4, 0.6, 0.8, 0.9]
TARGETS = [0.6, 0.4, 0.8, 0.2]
CLIENT_TIMEOUT = 180

# Known failures: (fixture, route) -> (check that fails, what the client sent). Strict: each must
# still fail exactly that check. Fix the writer, then delete the entry.
KNOWN_FAILURES: dict[tuple[str, str], tuple[str, str]] = {}

# A call id at the start of a ledger line ("- toolu_... Read {...} => ...").
CALL_ID = re.compile(r"(?<=^- )\S+")

CHECKS = ["accepted", "summary", "tail", "pairing"]


@dataclass
class Row:
    client: str
    fixture: str
    route: str
    size: str = ""
    status: str = "run"  # run | skip | no-rewrite
    note: str = ""
    results: dict[str, bool | None] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0


def log(*a) -> None:
    print(*a, flush=True)


# --- clients -------------------------------------------------------------------------------


def install(cache: Path) -> dict[str, Path]:
    """One `npm install` of the pinned clients into `cache` (skipped when it already holds
    exactly those versions). Returns each client's executable; fails when one is missing."""
    cache.mkdir(parents=True, exist_ok=True)
    want = {pkg: ver for pkg, ver, _ in CLIENTS.values()}

    def installed() -> bool:
        for pkg, ver in want.items():
            pj = cache / "node_modules" / pkg / "package.json"
            if not pj.exists() or json.loads(pj.read_text()).get("version") != ver:
                return False
        return True

    if not installed():
        (cache / "package.json").write_text(json.dumps({"private": True, "dependencies": want}, indent=2) + "\n")
        t = time.time()
        cmd = ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--save-exact",
               "--loglevel=error", *[f"{p}@{v}" for p, v in want.items()]]
        log("$", " ".join(cmd))
        p = subprocess.run(cmd, cwd=cache)
        if p.returncode != 0 or not installed():
            sys.exit(f"clients: npm install failed (exit {p.returncode}); no client test can run")
        log(f"installed in {time.time() - t:.0f}s")
    bins = {
        "claude-code": cache / "node_modules/@anthropic-ai/claude-code-linux-x64/claude",
        "codex": cache / "node_modules/.bin/codex",
        "gemini-cli": cache / "node_modules/.bin/gemini",
    }
    if not bins["claude-code"].exists():
        bins["claude-code"] = cache / "node_modules/.bin/claude"
    for fmt, b in bins.items():
        p = subprocess.run([str(b), "--version"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, HOME=str(cache)))
        ver = CLIENTS[fmt][1]
        if p.returncode != 0 or ver not in p.stdout:
            sys.exit(f"clients: {b} --version gave exit {p.returncode}, {p.stdout.strip()!r} {p.stderr.strip()[:300]!r}; want {ver}")
    return bins


def run_client(fmt: str, exe: Path, data: bytes, home: Path, front=None) -> tuple[int, str, list[dict]]:
    """Place `data` where the client looks, resume it against a stand-in, return
    (exit status, output, recorded requests). `front`, when given, is called with the
    stand-in's URL and returns a context manager giving the URL the client is pointed at
    instead (proxy_clients.py puts cutpoint-proxy there); the stand-in still records."""
    shutil.rmtree(home, ignore_errors=True)
    cwd = home / "work"
    cwd.mkdir(parents=True)
    sid = sessions.session_id(fmt, data)
    base = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb",
            "NO_COLOR": "1"}
    with Recorder() as rec, (front or contextlib.nullcontext)(f"http://127.0.0.1:{rec.port}") as url:
        if fmt == "claude-code":
            d = home / ".claude/projects" / re.sub(r"[/.]", "-", str(cwd))
            d.mkdir(parents=True)
            (d / f"{sid}.jsonl").write_bytes(data)
            env = dict(base, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="sk-standin", DISABLE_TELEMETRY="1",
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
            cmd = [str(exe), "-p", "continue", "--resume", sid, "--model", "claude-sonnet-4-5"]
        elif fmt == "codex":
            meta = json.loads(data.split(b"\n", 1)[0])["payload"]
            ts = meta["timestamp"]
            ch = home / ".codex"
            d = ch / "sessions" / ts[:4] / ts[5:7] / ts[8:10]
            d.mkdir(parents=True)
            (d / f"rollout-{ts[:19].replace(':', '-')}-{sid}.jsonl").write_bytes(data)
            (ch / "config.toml").write_text(f'openai_base_url = "{url}/v1"\n')
            env = dict(base, CODEX_HOME=str(ch), CODEX_API_KEY="sk-standin")
            cmd = [str(exe), "exec", "--skip-git-repo-check", "resume", "--all", sid, "continue"]
        else:
            g = home / ".gemini"
            chats = g / "tmp/work/chats"
            chats.mkdir(parents=True)
            (g / "history/work").mkdir(parents=True)
            for root in (g / "tmp/work", g / "history/work"):
                (root / ".project_root").write_text(str(cwd))
            (g / "projects.json").write_text(json.dumps({"projects": {str(cwd): "work"}}))
            (g / "settings.json").write_text(json.dumps({
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "telemetry": {"enabled": False}, "privacy": {"usageStatisticsEnabled": False},
                "general": {"disableAutoUpdate": True, "enableAutoUpdate": False}, "ide": {"enabled": False}}))
            (chats / f"session-2025-01-01T00-00-{sid[:8]}.json").write_bytes(data)
            env = dict(base, GEMINI_API_KEY="standin", GOOGLE_GEMINI_BASE_URL=url, GEMINI_CLI_TRUST_WORKSPACE="true")
            cmd = [str(exe), "--resume", sid, "-p", "continue"]
        try:
            p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=CLIENT_TIMEOUT,
                               stdin=subprocess.DEVNULL)
            rc, out = p.returncode, p.stdout + "\n" + p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out = -1, f"timed out after {CLIENT_TIMEOUT}s\n{e.stdout or ''}{e.stderr or ''}"
        return rc, out, list(rec.requests)


def main_request(fmt: str, requests: list[dict]) -> dict | None:
    """The request that carries the resumed conversation and the new "continue" prompt."""
    want = {"claude-code": "/v1/messages", "codex": "/v1/responses", "gemini-cli": ":streamGenerateContent"}[fmt]
    cands = [r for r in requests if r["method"] == "POST" and want in r["path"] and isinstance(r["json"], dict)
             and "count_tokens" not in r["path"]]
    cands = [r for r in cands if any(s.strip() == "continue" or s.endswith("continue") for s in checks.strings(checks.conversation(fmt, r["json"])))] or cands
    return cands[-1]["json"] if cands else None


# --- cutpoint ------------------------------------------------------------------------------


def cutpoint(bin_: Path, args: list[str], path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_), *args, str(path)], capture_output=True, timeout=600)


def tokens(bin_: Path, fmt: str, path: Path) -> int:
    p = cutpoint(bin_, ["stats", "--json", "--format", fmt], path)
    if p.returncode != 0:
        raise RuntimeError(f"cutpoint stats {path.name}: exit {p.returncode}: {p.stderr.decode()[:300]}")
    return int(json.loads(p.stdout)["tokens"])


def rewrite(bin_: Path, fmt: str, path: Path, route: str, total: int) -> tuple[bytes | None, str, str]:
    """(rewritten bytes or None, the size used, why there is no rewrite)."""
    if route == "original":
        return path.read_bytes(), "", ""
    original = path.read_bytes()
    last = ""
    targeted = route.startswith("target")
    for frac in TARGETS if targeted else BUDGETS:
        n = max(1, int(total * frac))
        if targeted:
            args, size = ["compact", "--format", fmt, "--target", str(n)], f"target {int(frac * 100)}%"
            if KEEP_HEAD in route:
                args += ["--keep-head", "1"]
            if route.endswith(ALLOW):
                args += ["--allow-invalidated-thinking"]
        else:
            base, allow, _ = route.partition(ALLOW)
            strat, _, preset = base.partition(":")
            args = ["compact", "--format", fmt, "--strategy", strat, "--budget", str(n)]
            if preset:
                args += ["--preset", preset]
            if allow:
                args += ["--allow-invalidated-thinking"]
            size = f"budget {int(frac * 100)}%"
        p = cutpoint(bin_, args, path)
        if p.returncode == 0 and p.stdout != original:
            return p.stdout, size, ""
        if p.returncode not in (0, 3):
            raise RuntimeError(f"cutpoint {' '.join(args)} {path.name}: exit {p.returncode}: {p.stderr.decode()[:400]}")
        err = p.stderr.decode().strip().splitlines()
        last = f"exit {p.returncode}: {err[-1][:160]}" if p.returncode else "no change"
        if targeted and p.returncode == 0:
            last = "no change"
    return None, "", f"{last} (tried {', '.join(str(int(f * 100)) + '%' for f in (TARGETS if targeted else BUDGETS))})"


# --- the checks ----------------------------------------------------------------------------


def lines_of(texts: list[str]) -> list[str]:
    out = []
    for t in texts:
        for line in t.splitlines():
            line = line.strip()
            if line:
                out.append(line)
    return out


def subsequence(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(h == n for h in it) for n in needle)


@dataclass
class Control:
    """What the client sent when it resumed the fixture as it is: the rewrites are judged
    against it, so a client's own choices (Claude Code follows the `parentUuid` chain from the
    newest leaf and leaves dead branches out) are not counted against cutpoint."""

    hay: str
    calls: list[str]
    ids: set[str]
    errs: set[str]

    def sent(self, fmt: str, record, texts: list[str]) -> bool:
        """Whether the client sent this record of the original: by its call ids when it has
        any, else by one of its texts, whole."""
        ids = sessions.all_ids(fmt, record)
        if ids:
            return any(i in self.ids for i in ids)
        whole = [t.strip() for t in texts if t.strip()]
        return not whole or any(t in self.hay for t in whole)


def kind(err: str) -> str:
    """A violation without its indices and ids, to tell the fixture's own from new ones."""
    return re.sub(r"\b(message|item|content) \d+|\S*_[A-Za-z0-9]{8,}\S*|\d+", "#", err)


def dedup(xs: list[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in xs if not (x in seen or seen.add(x))]


def judge(fmt: str, route: str, original: bytes, rewritten: bytes, rc: int, out: str, reqs: list[dict], row: Row,
          control: Control | None) -> Control | None:
    body = main_request(fmt, reqs)
    accepted = rc == 0 and body is not None and REPLY_TEXT in out
    row.results["accepted"] = accepted
    if not accepted:
        row.details.append(f"accepted: exit {rc}, {len(reqs)} requests; output: {out.strip()[-400:]!r}")
        row.results.update(summary=None, tail=None, pairing=None)
        return None
    hay = "\x00".join(checks.strings(checks.conversation(fmt, body)) + checks.strings(
        body.get("system") or body.get("instructions") or body.get("systemInstruction") or ""))
    errs = checks.PAIRING[fmt](body)
    sent_calls = dedup(checks.call_ids_in_request(fmt, body))
    if route == "original":
        orig = [(r, sessions.sent_texts(fmt, r)) for _, r in sessions.read(fmt, original)]
        ol = lines_of([t for _, ts in orig if ts for t in ts])
        n = sum(1 for x in ol if x in hay)
        row.note = f"the control: {n} of {len(ol)} lines of the file sent"
        # The fixture's own violations describe the fixture, not cutpoint; the rewrites must
        # not add any.
        row.results.update(summary=None, tail=None, pairing=None)
        if errs:
            row.note += f"; the request breaks {len(errs)} rule(s) as the file does: {errs[0]}"
        return Control(hay, sent_calls, checks.ids_in_request(fmt, body), {kind(e) for e in errs})
    assert control is not None
    orig_recs = sessions.read(fmt, original)
    old = {raw for raw, _ in orig_recs}
    by_uuid = {r.get("uuid"): r for _, r in orig_recs if isinstance(r, dict) and r.get("uuid")}
    recs = sessions.read(fmt, rewritten)
    facing = []  # (index in recs, record, texts sent)
    for k, (raw, r) in enumerate(recs):
        t = sessions.sent_texts(fmt, r)
        if t is not None:
            facing.append((k, r, t))
    written = [i for i, (k, _, _) in enumerate(facing) if recs[k][0] not in old]
    if written:
        required, skipped, empty = [], 0, []
        for i in written:
            k, r, texts = facing[i]
            lines = lines_of(texts)
            was = by_uuid.get(r.get("uuid")) if fmt == "claude-code" else None
            if was is not None:
                # An edit in place: required when the client sent the record it edits; then
                # its new lines, and the old ones the client sent, must reach the model.
                was_texts = sessions.sent_texts(fmt, was) or []
                if not control.sent(fmt, was, was_texts):
                    skipped += 1
                    continue
                before = set(lines_of(was_texts))
                lines = [x for x in lines if x not in before or x in control.hay]
            elif not "".join(texts).strip():
                empty.append(k + 1)
            # A ledger line of a call the client did not send from the original either (a
            # dead branch of a Claude Code file) is not required.
            lines = [x for x in lines if not (m := CALL_ID.search(x)) or m.group(0) in control.ids]
            required += lines
        missing = [x for x in required if x not in hay]
        row.results["summary"] = not missing and not empty
        if missing:
            row.details.append(f"summary: {len(missing)} of {len(required)} written lines not in the request, first: {missing[0][:200]!r}")
        if empty:
            row.details.append(f"summary: written record(s) on line(s) {empty[:5]} carry no text")
        if skipped:
            row.note = (row.note + "; " if row.note else "") + f"{skipped} edited records on branches the client does not send"
        tail = facing[written[-1] + 1:]
    else:
        row.results["summary"] = None
        row.note = (row.note + "; " if row.note else "") + "no model-facing record written"
        start = max([k for k, (_, r) in enumerate(recs) if sessions.is_boundary(fmt, r)], default=0)
        tail = [f for f in facing if f[0] >= start]
    if KEEP_HEAD in route and facing and recs[facing[0][0]][0] in old:
        # The pinned head stays live: each of its records that the client sent from the
        # original, it sends now. Sent is told by the record's call ids, or by a text no
        # other record of the original carries: a text two records share (an interrupt
        # notice repeated later in the session) does not tell which one the client sent,
        # and a record on a dead branch (before a /clear, its parent not in the file) is
        # left out of the original's request too.
        first_written = facing[written[0]][0] if written else len(recs)
        shared = Counter(t.strip() for _, r in orig_recs for t in (sessions.sent_texts(fmt, r) or []) if t.strip())
        head_recs = [(r, ts) for k, r, ts in facing if k < first_written and recs[k][0] in old
                     and (sessions.all_ids(fmt, r) or all(shared[t.strip()] <= 1 for t in ts if t.strip()))
                     and control.sent(fmt, r, ts)]
        head = [x for x in lines_of([t for _, ts in head_recs for t in ts]) if x in control.hay]
        lost = [x for x in head if x not in hay]
        if lost:
            row.results["summary"] = False
            row.details.append(f"head: {len(lost)} of {len(head)} lines of the pinned head not in the request, first: {lost[0][:200]!r}")
    # The kept tail: the records of it the client sent from the original, it sends now.
    kept = [(k, r, ts) for k, r, ts in tail if control.sent(fmt, r, ts)]
    tl = [x for x in lines_of([t for _, _, ts in kept for t in ts]) if x in control.hay]
    tmiss = [x for x in tl if x not in hay]
    known = set(control.calls)
    ids = dedup([c for _, r, _ in kept for c in sessions.call_ids(fmt, r) if c in known])
    ok_order = subsequence(ids, sent_calls)
    row.results["tail"] = not tmiss and ok_order
    if tmiss:
        row.details.append(f"tail: {len(tmiss)} of {len(tl)} kept lines not in the request, first: {tmiss[0][:200]!r}")
    if not ok_order:
        row.details.append(f"tail: the {len(ids)} kept calls are not in the request in their order")
    new = [e for e in errs if kind(e) not in control.errs]
    row.results["pairing"] = not new
    if errs:
        row.details.append(f"pairing: {len(new)} new violations ({len(errs)} in all), first: {(new or errs)[:3]}")
        if not new:
            row.note = (row.note + "; " if row.note else "") + "pairing: only the original's own violations"
    return None


# One resume per distinct rewrite of a fixture: routes that write the same bytes (30% of
# them: a preset that comes to what its strategy writes, a budget two strategies meet the
# same way) share the client's run, and each route judges that run by its own checks.
# Keyed by (fixture, sha256 of the bytes); the first route to get there runs the client,
# any other waits for it.
_RESUMES: dict[tuple[str, str], tuple[cf.Future, str]] = {}
_RESUMES_LOCK = threading.Lock()


def resume_once(fmt: str, exe: Path, path: Path, route: str, data: bytes, home: Path) -> tuple[tuple[int, str, list[dict]], str]:
    """The client's (exit status, output, requests) for `data`, and the route whose run
    it is."""
    key = (path.name, hashlib.sha256(data).hexdigest())
    with _RESUMES_LOCK:
        first = key not in _RESUMES
        if first:
            _RESUMES[key] = (cf.Future(), route)
        fut, ran_as = _RESUMES[key]
    if first:
        try:
            fut.set_result(run_client(fmt, exe, data, home))
        except BaseException as e:
            fut.set_exception(e)
    return fut.result(), ran_as


def run_one(bins: dict[str, Path], bin_: Path, fmt: str, path: Path, route: str, total: int, runs: Path, keep: bool,
            control: Control | None = None) -> tuple[Row, Control | None]:
    row = Row(CLIENTS[fmt][2], path.name, route)
    t = time.time()
    original = path.read_bytes()
    data, row.size, why = rewrite(bin_, fmt, path, route, total)
    if data is None:
        row.status, row.note = "no-rewrite", why
        row.seconds = time.time() - t
        return row, None
    home = runs / path.stem / route.replace(":", "-")
    (rc, out, reqs), ran_as = resume_once(fmt, bins[fmt], path, route, data, home)
    ctl = judge(fmt, route, original, data, rc, out, reqs, row, control)
    if ran_as != route:
        row.note = (row.note + "; " if row.note else "") + f"the same bytes as {ran_as}: its resume, judged here"
    if keep or not all(v is not False for v in row.results.values()):
        home.mkdir(parents=True, exist_ok=True)
        (home / "rewritten").write_bytes(data)
        (home / "requests.json").write_text(json.dumps(reqs, ensure_ascii=False))
        (home / "client-output.txt").write_text(out)
    else:
        shutil.rmtree(home, ignore_errors=True)
    row.seconds = time.time() - t
    return row, ctl


def fixtures() -> list[tuple[str, Path]]:
    out = []
    for d in FIXTURE_DIRS:
        for p in sorted(d.iterdir()):
            for pre, fmt in PREFIX.items():
                if p.name.startswith(pre):
                    out.append((fmt, p))
    return out


# --- the table -----------------------------------------------------------------------------


def mark(v: bool | None) -> str:
    return "n/a" if v is None else ("yes" if v else "**no**")


def table(rows: list[Row]) -> str:
    head = "| client | version | fixture | route | size | accepted | summary delivered | tail verbatim | pairing ok | note |\n|---|---|---|---|---|---|---|---|---|---|\n"
    body = []
    for r in rows:
        ver = next(v for _, v, name in CLIENTS.values() if name == r.client)
        if r.status == "run":
            cells = [mark(r.results.get(c)) for c in CHECKS]
        else:
            cells = ["-"] * 4
        note = r.note
        kf = KNOWN_FAILURES.get((r.fixture, r.route))
        if kf:
            note = (note + "; " if note else "") + f"known failure ({kf[0]}): {kf[1]}"
        body.append(f"| {r.client} | {ver} | `{r.fixture}` | {r.route} | {r.size or '-'} | " + " | ".join(cells) + f" | {note.replace('|', '/')} |")
    return head + "\n".join(body) + "\n"


def write_docs(rows: list[Row], doc: Path, summary: str) -> None:
    start, end = "<!-- results: written by tests/clients/harness.py -->", "<!-- end of results -->"
    text = doc.read_text() if doc.exists() else f"# Real clients\n\n{start}\n{end}\n"
    a, b = text.index(start) + len(start), text.index(end)
    doc.write_text(text[:a] + "\n" + summary + "\n\n" + table(rows) + text[b:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cutpoint", type=Path, default=ROOT / "target/release/cutpoint")
    ap.add_argument("--clients-dir", type=Path, default=ROOT / "target/clients")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="run only fixtures whose name contains this")
    ap.add_argument("--routes", default="", help="comma-separated routes (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep every run's HOME, rewrite and requests")
    ap.add_argument("--docs", type=Path, default=ROOT / "docs/clients.md")
    a = ap.parse_args()
    # Absolute: each client runs in a temporary project folder of its own.
    a.cutpoint, a.clients_dir, a.docs = a.cutpoint.resolve(), a.clients_dir.resolve(), a.docs.resolve()
    t0 = time.time()
    bins = install(a.clients_dir)
    t_install = time.time() - t0
    runs = a.clients_dir / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    routes = a.routes.split(",") if a.routes else ROUTES
    jobs, rows = [], []
    for fmt, path in fixtures():
        if a.only and a.only not in path.name:
            continue
        data = path.read_bytes()
        if sessions.sidechain_only(fmt, data):
            rows.append(Row(CLIENTS[fmt][2], path.name, "all", status="skip",
                            note="sidechain-only file (subagent or compaction side conversation): Claude Code resumes main sessions only"))
            continue
        total = tokens(a.cutpoint, fmt, path)
        jobs += [(fmt, path, r, total) for r in routes]
    log(f"{len(jobs)} runs, {a.jobs} at a time")

    def show(row: Row) -> None:
        res = " ".join(f"{c}={mark(row.results.get(c))}" for c in CHECKS) if row.status == "run" else row.status
        log(f"{row.seconds:5.1f}s {row.fixture[:60]:60} {row.route:20} {row.size:12} {res} {row.note[:100]}")

    def pool(batch, controls):
        with cf.ThreadPoolExecutor(a.jobs) as ex:
            futs = {ex.submit(run_one, bins, a.cutpoint, fmt, p, r, n, runs, a.keep, controls.get(p.name)): (fmt, p.name, r)
                    for fmt, p, r, n in batch}
            for f in cf.as_completed(futs):
                fmt, name, r = futs[f]
                try:
                    row, ctl = f.result()
                except Exception as e:  # a cutpoint crash or a harness bug: a failure, with its name
                    row, ctl = Row(CLIENTS[fmt][2], name, r, status="error", note=f"{type(e).__name__}: {e}"[:300]), None
                rows.append(row)
                if ctl is not None:
                    controls[name] = ctl
                show(row)

    # First each file as it is (the control), then the rewrites, judged against it.
    controls: dict[str, Control] = {}
    pool([j for j in jobs if j[2] == "original"], controls)
    rest = []
    for j in jobs:
        if j[2] != "original":
            if j[1].name in controls:
                rest.append(j)
            elif not any(r.fixture == j[1].name and r.route == j[2] for r in rows):
                rows.append(Row(CLIENTS[j[0]][2], j[1].name, j[2], status="error",
                                note="the client did not resume the file as it is, so no rewrite of it is judged"))
    # Route by route across the fixtures, so that two routes of one fixture that write the
    # same bytes seldom run side by side (the second would wait for the first's resume).
    rank = {r: i for i, r in enumerate(routes)}
    rest.sort(key=lambda j: (rank.get(j[2], len(rank)), j[1].name))
    pool(rest, controls)
    order = {r: i for i, r in enumerate(["all"] + ROUTES)}
    rows.sort(key=lambda r: (r.client, r.fixture, order.get(r.route, 99)))

    unexpected, fixed = [], []
    for r in rows:
        failed = sorted(c for c, v in r.results.items() if v is False)
        kf = KNOWN_FAILURES.get((r.fixture, r.route))
        if r.status == "error":
            unexpected.append(f"{r.fixture} {r.route}: {r.note}")
        elif kf:
            if failed != [kf[0]]:
                (fixed if not failed else unexpected).append(
                    f"{r.fixture} {r.route}: listed as failing {kf[0]}, now fails {failed or 'nothing'}")
        elif failed:
            unexpected.append(f"{r.fixture} {r.route}: fails {failed}: " + " / ".join(r.details))
    listed = {(r.fixture, r.route) for r in rows}
    for k in KNOWN_FAILURES:
        if k not in listed and not a.only and not a.routes:
            unexpected.append(f"{k}: in KNOWN_FAILURES but not run")
    ran = [r for r in rows if r.status == "run"]
    elapsed = time.time() - t0
    summary = (f"{len(ran)} resumes ({sum(1 for r in rows if r.status == 'no-rewrite')} routes with no rewrite, "
               f"{sum(1 for r in rows if r.status == 'skip')} files skipped), "
               f"{sum(1 for r in ran if all(v is not False for v in r.results.values()))} passing every check, "
               f"{len([k for k in KNOWN_FAILURES if k in listed])} known failures.")
    print()
    print(table(rows))
    for r in rows:
        if r.details:
            log(f"details {r.fixture} {r.route}: " + " / ".join(r.details))
    log(f"\n{summary} Install/check {t_install:.0f}s, total {elapsed:.0f}s.")
    if not a.only and not a.routes:
        write_docs(rows, a.docs, summary)
        log(f"wrote {a.docs.relative_to(ROOT)}")
    for u in unexpected:
        log(f"UNEXPECTED: {u}")
    for u in fixed:
        log(f"NOW PASSES (remove it from KNOWN_FAILURES): {u}")
    return 1 if unexpected or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
