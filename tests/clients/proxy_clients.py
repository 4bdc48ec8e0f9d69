#!/usr/bin/env python3
"""Real clients through cutpoint-proxy, offline.

For every real Claude Code session and Codex rollout the real-client harness resumes
(harness.py: the same fixtures, the same pinned clients, the same loopback stand-in), this
resumes the ORIGINAL file three times, with the stand-in recording what arrives:

1. direct: the client pointed at the stand-in (the control);
2. check: the client pointed at `cutpoint-proxy --mode check --upstream <stand-in>`;
3. compact: the client pointed at `cutpoint-proxy --mode compact --budget N`, N a share
   (40%, else 60%, else 80%) of the control request's history tokens, the first at which
   `cutpoint compact --strategy pipeline` (thinking kept valid, the default) rewrites that request (the
   proxy runs the same pipeline with the same estimate); at 40% when none does, and then
   the proxy must defer: forward the request byte for byte as the client sent it.

and checks (the table in docs/proxy.md, "Real clients through the proxy"):

- accepted: the client exits 0 and printed the stand-in's streamed reply, which reached it
  through the proxy;
- check mode: the stand-in receives, byte for byte, the request the client sent the proxy
  (a loopback relay in front of the proxy, `Tee`, keeps what the client sent), with every
  end-to-end header as sent; and that request is the one the client sends directly (after
  masking the values it draws afresh on each run); a request that breaks a rule is refused
  by the proxy and never forwarded;
- compact mode: the stand-in receives a smaller request than the control, which the proxy
  says it compacted (its log's tokens before and after, the after within the budget), which
  keeps checks.py's pairing and reasoning rules, carries cutpoint's ledger or cleared
  results, has the end-to-end headers the client sent, still names every call id of the control (as a call or in the ledger), keeps
  every field but the history as the client sent it, and ends with the same message (the
  new "continue" turn). Client-made per-run values (a device id, turn ids) are masked in
  these comparisons (`masked`). Anthropic requests are checked as the API reads them,
  consecutive same-role messages merged (checks.pairing_anthropic_merged): the proxy's
  summary is a user message of its own, often right after the first prompt.

Gemini CLI is not run: the proxy has no Gemini route.

Usage: python3 tests/clients/proxy_clients.py --proxy BIN --cutpoint BIN [--jobs N] [--only SUBSTRING]
(scripts/clients.sh builds both and runs this after harness.py.)
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

import checks  # noqa: E402
import harness  # noqa: E402
import sessions  # noqa: E402
from standin import REPLY_TEXT  # noqa: E402

ROOT = harness.ROOT
FORMATS = {"claude-code": "anthropic", "codex": "openai-responses"}
SHARES = [0.4, 0.6, 0.8]
# What cutpoint's pipeline writes into a history it compacts: the ledger heading of a
# summary or digest (src/compact/summary.rs) and the text of a cleared result
# (src/compact/strategy/clear.rs).
LEDGER = "Tool calls summarized (call id, tool, arguments, first line of result):"
CLEARED = "[tool result cleared to save context]"
COMPACTED = re.compile(r"compacted.*?tokens_before=(\d+).*?tokens_after=(\d+)")
CHECKS = ["accepted", "check mode", "compact mode"]


@dataclass
class Row:
    client: str
    fixture: str
    size: str = ""
    results: dict[str, bool | None] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tee:
    """A loopback TCP relay in front of the proxy that keeps the bytes the client sends, so
    that a run can compare what the client sent the proxy with what reached the stand-in
    (the same run: no client-made per-run value gets in the way). **O(bytes)**."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.sent: list[bytes] = []  # per connection, what the client sent
        self._lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.target))
            buf = bytearray()
            with self._lock:
                self.sent.append(buf)  # type: ignore[arg-type]
            threading.Thread(target=self._pipe, args=(c, u, buf), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c, None), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket, keep: bytearray | None) -> None:
        try:
            while chunk := a.recv(65536):
                if keep is not None:
                    keep += chunk
                b.sendall(chunk)
        except OSError:
            pass
        for s_ in (b, a):
            try:
                s_.shutdown(socket.SHUT_WR if s_ is b else socket.SHUT_RD)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()

    def requests(self) -> list[tuple[str, str, dict[str, str], bytes]]:
        """(method, path, headers with lowercase names, body) of every request sent."""
        out = []
        with self._lock:
            streams = [bytes(b) for b in self.sent]
        for data in streams:
            while data:
                head, sep, rest = data.partition(b"\r\n\r\n")
                if not sep:
                    break
                lines = head.decode("latin-1").split("\r\n")
                method, path = (lines[0].split(" ") + ["", ""])[:2]
                headers = {}
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    body = b""
                    while True:
                        size_line, _, rest = rest.partition(b"\r\n")
                        n = int(size_line.split(b";")[0] or b"0", 16)
                        if n == 0:
                            _, _, rest = rest.partition(b"\r\n")
                            break
                        body, rest = body + rest[:n], rest[n + 2:]
                else:
                    n = int(headers.get("content-length") or 0)
                    body, rest = rest[:n], rest[n:]
                out.append((method, path, headers, body))
                data = rest
        return out


class Proxy:
    """`front` for harness.run_client: cutpoint-proxy on a free loopback port in front of the
    stand-in, behind a Tee. After the run, `log` holds its stderr, `metrics` its /metrics and
    `sent` the requests the client sent it."""

    def __init__(self, bin_: Path, args: list[str], log_path: Path) -> None:
        self.bin, self.args, self.log_path = bin_, args, log_path
        self.log, self.metrics = "", {}
        self.sent: list[tuple[str, str, dict[str, str], bytes]] = []

    @contextlib.contextmanager
    def __call__(self, upstream: str):
        for _ in range(5):  # the free port may be taken between the probe and the bind
            port = free_port()
            with open(self.log_path, "wb") as err:
                p = subprocess.Popen([str(self.bin), "--listen", f"127.0.0.1:{port}", "--upstream", upstream, *self.args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                     env=dict(os.environ, RUST_LOG="info"))
            if self._ready(p, port):
                break
            p.wait()
        else:
            raise RuntimeError(f"cutpoint-proxy did not start: {self.log_path.read_text()[-400:]}")
        tee = Tee(port)
        try:
            yield f"http://127.0.0.1:{tee.port}"
        finally:
            tee.close()
            self.sent = tee.requests()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    self.metrics = parse_metrics(r.read().decode())
            except OSError as e:
                self.metrics = {"error": str(e)}
            p.send_signal(signal.SIGINT)  # ctrl-c: graceful, exits 0
            try:
                rc = p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
            self.log = self.log_path.read_text(errors="replace")
            if rc != 0:
                self.log += f"\n(cutpoint-proxy exited {rc} on ctrl-c)"

    @staticmethod
    def _ready(p: subprocess.Popen, port: int) -> bool:
        deadline = time.time() + 30
        while time.time() < deadline:
            if p.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                time.sleep(0.05)
        p.kill()
        return False


def parse_metrics(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, v = line.rpartition(" ")
            try:
                out[name.removeprefix("cutpoint_proxy_")] = float(v)
            except ValueError:
                pass
    return out


def history_tokens(cutpoint: Path, fmt: str, body: dict, scratch: Path) -> int:
    """The library's estimate of the request's history (what --budget is compared with)."""
    scratch.write_text(json.dumps(body, ensure_ascii=False, separators=(",", ":")))
    return harness.tokens(cutpoint, FORMATS[fmt], scratch)


def budget_for(cutpoint: Path, fmt: str, body: dict, total: int, scratch: Path) -> tuple[int, str, str]:
    """The first share of `total` at which the proxy's pipeline rewrites `body`: (budget, size,
    why not when none)."""
    scratch.write_text(json.dumps(body, ensure_ascii=False, separators=(",", ":")))
    last = ""
    for share in SHARES:
        n = max(1, int(total * share))
        p = harness.cutpoint(cutpoint, ["compact", "--format", FORMATS[fmt], "--strategy", "pipeline", "--budget", str(n),
                                        ], scratch)
        if p.returncode == 0 and p.stdout != scratch.read_bytes():
            return n, f"budget {int(share * 100)}% of {total}", ""
        last = f"exit {p.returncode}: {(p.stderr.decode().strip().splitlines() or [''])[-1][:160]}"
    return 0, "", f"{last} (tried {', '.join(f'{int(s * 100)}%' for s in SHARES)})"


def main_entry(fmt: str, reqs: list[dict]) -> dict | None:
    """The recorded request (with its sha256 and length) whose body harness.main_request picks."""
    body = harness.main_request(fmt, reqs)
    return next((r for r in reversed(reqs) if r["json"] is body), None) if body is not None else None


def accepted(rc: int, out: str, entry: dict | None) -> bool:
    return rc == 0 and entry is not None and REPLY_TEXT in out


def everything_but_history(fmt: str, body: dict) -> dict:
    key = {"claude-code": "messages", "codex": "input"}[fmt]
    return {k: v for k, v in body.items() if k != key}


# Values a client makes afresh on every run, masked before a proxied request is compared with the
# direct one: Claude Code's `metadata.user_id` holds a `device_id` drawn for a fresh HOME; Codex's
# `client_metadata` holds an installation id and turn ids, and the items it adds for the new turn
# carry fresh UUIDv7 ids (`msg_01a2...-7...`) and turn metadata.
UUID7_ID = re.compile(r"^[a-z]+_[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$")
PER_RUN = "<per-run>"


def masked(fmt: str, body: dict) -> dict:
    body = json.loads(json.dumps(body))
    if fmt == "claude-code":
        md = body.get("metadata")
        if isinstance(md, dict) and isinstance(md.get("user_id"), str):
            try:
                uid = json.loads(md["user_id"])
                if isinstance(uid, dict) and "device_id" in uid:
                    uid["device_id"] = PER_RUN
                    md["user_id"] = json.dumps(uid)
            except ValueError:
                pass
    else:
        if "client_metadata" in body:
            body["client_metadata"] = PER_RUN
        for it in body.get("input") or []:
            if isinstance(it, dict):
                if isinstance(it.get("id"), str) and UUID7_ID.match(it["id"]):
                    it["id"] = PER_RUN
                if "internal_chat_message_metadata_passthrough" in it:
                    it["internal_chat_message_metadata_passthrough"] = PER_RUN
    return body


def pairing(fmt: str, body: dict) -> list[str]:
    """checks.py's rules; for the Messages API on the request as the API reads it (consecutive
    same-role messages merged, docs/providers.md, Anthropic rule 5)."""
    return checks.pairing_anthropic_merged(body) if fmt == "claude-code" else checks.pairing_responses(body)


HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "host",
       "content-length"}


def sent_main(fmt: str, px: Proxy) -> tuple[dict[str, str], bytes] | None:
    """Headers and body of the main request the client sent the proxy (as main_entry picks)."""
    entries = []
    for method, path, headers, body in px.sent:
        try:
            j = json.loads(body) if body else None
        except ValueError:
            j = None
        entries.append({"method": method, "path": path, "json": j, "headers": headers, "body": body})
    e = main_entry(fmt, entries)
    return (e["headers"], e["body"]) if e else None


def passed_on(fmt: str, px: Proxy, entry: dict, same_body: bool) -> list[str]:
    """What differs between the main request the client sent the proxy and the one the stand-in
    received: the body (when `same_body`) by SHA-256, and every end-to-end header (the proxy's
    own, hop-by-hop ones, `host` and `content-length`, aside)."""
    got = sent_main(fmt, px)
    if got is None:
        return ["the client's request to the proxy was not seen"]
    headers, body = got
    out = []
    if same_body and hashlib.sha256(body).hexdigest() != entry["sha256"]:
        out.append(f"body: {len(body)} bytes sent, {entry['raw_len']} received, not the same bytes")
    recv = {k.lower(): v for k, v in entry["headers"].items()}
    for k in sorted(set(headers) | set(recv)):
        if k not in HOP and headers.get(k) != recv.get(k):
            out.append(f"header {k}: sent {headers.get(k)!r}, received {recv.get(k)!r}")
    return out


UPGRADE = 'refused_total{reason="upgrade"}'


def refusals(px: Proxy) -> int:
    """Requests the proxy refused, its 426s to a WebSocket upgrade (Codex's first try) aside."""
    return int(sum(v for k, v in px.metrics.items() if k.startswith("refused_total") and k != UPGRADE))


def run_fixture(bins: dict[str, Path], a, fmt: str, path: Path, runs: Path) -> Row:
    row = Row(harness.CLIENTS[fmt][2], path.name)
    t = time.time()
    data = path.read_bytes()
    out_dir = runs / path.stem
    out_dir.mkdir(parents=True, exist_ok=True)
    # One HOME for the three runs (each starts from it empty): the client puts its working
    # directory in the request.
    home = out_dir / "home"
    exe = bins[fmt]
    keep = a.keep

    def save(name: str, rc: int, out: str, reqs: list[dict], proxy: Proxy | None = None) -> None:
        d = out_dir / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "requests.json").write_text(json.dumps(reqs, ensure_ascii=False))
        (d / "client-output.txt").write_text(f"exit {rc}\n{out}")
        if proxy is not None:
            (d / "proxy.log").write_text(proxy.log)

    def done() -> Row:
        if not keep and not row.error and all(v is not False for v in row.results.values()):
            shutil.rmtree(out_dir, ignore_errors=True)
        row.seconds = time.time() - t
        return row

    # 1. direct: the control.
    rc, out, reqs = harness.run_client(fmt, exe, data, home)
    ctl = main_entry(fmt, reqs)
    save("direct", rc, out, reqs)
    if not accepted(rc, out, ctl):
        row.error = f"the client did not resume the file directly: exit {rc}, {len(reqs)} requests; {out.strip()[-300:]!r}"
        return done()
    c0 = ctl["json"]
    m0 = masked(fmt, c0)
    own = pairing(fmt, c0)
    hist0 = checks.conversation(fmt, c0)

    # 2. check mode.
    px = Proxy(a.proxy, ["--mode", "check"], out_dir / "proxy.log")
    rc, out, reqs = harness.run_client(fmt, exe, data, home, front=px)
    e1 = main_entry(fmt, reqs)
    refused = refusals(px)
    ok = True
    acc = accepted(rc, out, e1)
    row.results["accepted"] = acc
    if refused:
        # Refused: right only for a request that breaks a rule (checks.py's), and then never
        # forwarded.
        row.results["accepted"] = None
        ok = bool(own) and e1 is None
        row.notes["check mode"] = (f"refused ({int(refused)}), not forwarded: the request breaks {own[0]}" if ok else
                                   f"**refused** ({int(refused)}); forwarded: {e1 is not None}; checks.py finds {own[:1] or 'nothing'}")
        if not ok:
            row.details.append(f"check: refused; {out.strip()[-300:]!r}")
    elif not acc:
        ok = False
        row.details.append(f"check: exit {rc}, {len(reqs)} requests; {out.strip()[-300:]!r}")
    else:
        bad = passed_on(fmt, px, e1, same_body=True)
        if bad:
            ok = False
            row.details.append(f"check: the stand-in did not receive what the client sent the proxy: {bad[:3]}")
        else:
            row.notes["check mode"] = f"byte-identical to what the client sent the proxy ({e1['raw_len']} bytes), headers too"
            if px.metrics.get(UPGRADE):
                row.notes["check mode"] += f"; its {int(px.metrics[UPGRADE])} WebSocket upgrade(s) answered 426 by the proxy"
        if masked(fmt, e1["json"]) == m0:
            row.notes["check mode"] = row.notes.get("check mode", "") + "; the same as the direct request but for the client's per-run ids"
        else:
            ok = False
            diff = sorted(k for k in set(m0) | set(e1["json"]) if m0.get(k) != masked(fmt, e1["json"]).get(k))
            row.details.append(f"check: the client sent another request through the proxy than directly (differs in {diff})")
        if own:
            row.notes["check mode"] += (f"; forwarded though checks.py finds {len(own)} violation(s) in the client's request "
                                        f"({own[0]}), as cutpoint's check allows it")
    row.results["check mode"] = ok
    save("check", rc, out, reqs, px)

    # 3. compact mode.
    if refused:
        row.results["compact mode"] = None
        row.notes["compact mode"] = "not run: the proxy refuses the request in either mode"
        return done()
    scratch = out_dir / "control-request.json"
    total = history_tokens(a.cutpoint, fmt, c0, scratch)
    budget, row.size, why = budget_for(a.cutpoint, fmt, c0, total, scratch)
    deferred = not budget
    if deferred:
        # The pipeline cannot rewrite this request at any share tried: the proxy must defer,
        # forwarding it as it came, at the first share.
        budget = max(1, int(total * SHARES[0]))
        row.size = f"budget {int(SHARES[0] * 100)}% of {total}"
    px = Proxy(a.proxy, ["--mode", "compact", "--budget", str(budget)], out_dir / "proxy.log")
    rc, out, reqs = harness.run_client(fmt, exe, data, home, front=px)
    e2 = main_entry(fmt, reqs)
    save("compact", rc, out, reqs, px)
    fails = []
    if not accepted(rc, out, e2):
        row.results["accepted"] = False
        fails.append(f"exit {rc}, {len(reqs)} requests; {out.strip()[-300:]!r}")
    elif deferred:
        defers = px.metrics.get("deferrals_total", 0)
        if not defers or COMPACTED.search(px.log):
            fails.append(f"the proxy did not defer (metrics {px.metrics})")
        if masked(fmt, e2["json"]) != m0:
            fails.append("the deferred request is not the one the client sends directly")
        fails += passed_on(fmt, px, e2, same_body=True)
        if not fails:
            reason = re.findall(r"forwarded as it came.*?reason=(.*)", px.log)
            row.notes["compact mode"] = ("deferred, forwarded byte for byte as the client sent it, as the CLI predicts at 40%, 60% and 80%; the proxy: "
                                         + (reason[-1].strip().strip('"')[:240] if reason else why))
    else:
        c2 = e2["json"]
        m2 = masked(fmt, c2)
        hist2 = checks.conversation(fmt, c2)
        m = COMPACTED.findall(px.log)
        before = after = 0
        if not m:
            fails.append(f"the proxy did not compact (metrics {px.metrics}); log: {px.log.strip()[-300:]!r}")
        else:
            before, after = map(int, m[-1])
            if after > budget:
                fails.append(f"{after} tokens after, over the budget of {budget}")
        if e2["raw_len"] >= ctl["raw_len"]:
            fails.append(f"not smaller: {e2['raw_len']} bytes, the control {ctl['raw_len']}")
        # The client's own violations (a cut-down fixture) describe the fixture; the proxy
        # must add none.
        errs = [e for e in pairing(fmt, c2) if harness.kind(e) not in {harness.kind(x) for x in own}]
        if errs:
            fails.append(f"pairing: {len(errs)} new violations, first {errs[:3]}")
        hay = "\x00".join(checks.strings(hist2))
        wrote = [w for w, s in (("ledger", LEDGER), ("cleared results", CLEARED)) if s in hay]
        if not wrote:
            fails.append("neither a ledger nor a cleared result in the request")
        lost = [c for c in dedup(checks.call_ids_in_request(fmt, c0)) if c not in hay]
        if lost:
            fails.append(f"{len(lost)} call ids of the control named nowhere, first {lost[:3]}")
        fails += passed_on(fmt, px, e2, same_body=False)
        if everything_but_history(fmt, m2) != everything_but_history(fmt, m0):
            diff = sorted(k for k in set(m0) | set(m2) if m0.get(k) != m2.get(k) and k not in ("messages", "input"))
            fails.append(f"fields other than the history changed: {diff}")
        if not hist2 or checks.conversation(fmt, m2)[-1] != checks.conversation(fmt, m0)[-1]:
            fails.append("the last message is not the control's")
        if not fails:
            unit = "messages" if fmt == "claude-code" else "items"
            strict = len(checks.pairing_anthropic(c2)) if fmt == "claude-code" else 0
            row.notes["compact mode"] = (f"{len(hist0)} -> {len(hist2)} {unit}, {ctl['raw_len']} -> {e2['raw_len']} bytes; "
                                         f"the proxy: {before} -> {after} tokens (budget {budget}); carries the "
                                         f"{' and '.join(wrote)}, every call id"
                                         + (f"; {strict} pair(s) of same-role messages in a row, one turn to the API" if strict else ""))
    row.results["compact mode"] = ("deferred" if deferred else True) if not fails else False
    row.details += [f"compact: {f}" for f in fails]
    return done()


def dedup(xs: list[str]) -> list[str]:
    return harness.dedup([x for x in xs if x])


# --- the table -----------------------------------------------------------------------------


def mark(v) -> str:
    return v if isinstance(v, str) else harness.mark(v)


def table(rows: list[Row]) -> str:
    head = ("| client | version | fixture | compact size | accepted | check mode | compact mode | note |\n"
            "|---|---|---|---|---|---|---|---|\n")
    body = []
    for r in rows:
        ver = next(v for _, v, name in harness.CLIENTS.values() if name == r.client)
        if r.error:
            cells, note = ["**no**", "-", "-"], r.error
        else:
            cells = [mark(r.results.get(c)) for c in CHECKS]
            note = "; ".join(f"{k}: {v}" for k, v in r.notes.items())
        body.append(f"| {r.client} | {ver} | `{r.fixture}` | {r.size or '-'} | " + " | ".join(cells) + f" | {note.replace('|', '/')} |")
    return head + "\n".join(body) + "\n"


def write_docs(rows: list[Row], doc: Path, summary: str) -> None:
    start, end = "<!-- proxy results: written by tests/clients/proxy_clients.py -->", "<!-- end of proxy results -->"
    text = doc.read_text()
    a, b = text.index(start) + len(start), text.index(end)
    doc.write_text(text[:a] + "\n" + summary + "\n\n" + table(rows) + text[b:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--proxy", type=Path, default=ROOT / "target/debug/cutpoint-proxy")
    ap.add_argument("--cutpoint", type=Path, default=ROOT / "target/release/cutpoint")
    ap.add_argument("--clients-dir", type=Path, default=ROOT / "target/clients")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="run only fixtures whose name contains this")
    ap.add_argument("--keep", action="store_true", help="keep every run's HOME, requests and proxy log")
    ap.add_argument("--docs", type=Path, default=ROOT / "docs/proxy.md")
    a = ap.parse_args()
    a.proxy, a.cutpoint, a.clients_dir, a.docs = a.proxy.resolve(), a.cutpoint.resolve(), a.clients_dir.resolve(), a.docs.resolve()
    for b in (a.proxy, a.cutpoint):
        if not b.exists():
            sys.exit(f"proxy_clients: {b} does not exist (cargo build -p cutpoint-proxy -p cutpoint-cli)")
    t0 = time.time()
    bins = harness.install(a.clients_dir)
    runs = a.clients_dir / "proxy-runs"
    shutil.rmtree(runs, ignore_errors=True)
    jobs = []
    for fmt, path in harness.fixtures():
        if fmt not in FORMATS or (a.only and a.only not in path.name):
            continue
        if sessions.sidechain_only(fmt, path.read_bytes()):
            continue  # not a session: Claude Code does not resume it (harness.py lists it as skipped)
        jobs.append((fmt, path))
    harness.log(f"{len(jobs)} fixtures, 3 resumes each, {a.jobs} at a time")
    rows: list[Row] = []
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        futs = {ex.submit(run_fixture, bins, a, fmt, p, runs): (fmt, p) for fmt, p in jobs}
        for f in cf.as_completed(futs):
            fmt, p = futs[f]
            try:
                row = f.result()
            except Exception as e:  # a harness bug or a cutpoint crash: a failure, with its name
                row = Row(harness.CLIENTS[fmt][2], p.name, error=f"{type(e).__name__}: {e}"[:300])
            rows.append(row)
            res = row.error[:80] or " ".join(f"{c}={mark(row.results.get(c))}" for c in CHECKS)
            harness.log(f"{row.seconds:5.1f}s {row.fixture[:64]:64} {row.size:22} {res}")
    rows.sort(key=lambda r: (r.client, r.fixture))
    failed = [r for r in rows if r.error or any(v is False for v in r.results.values())]
    summary = (f"{len(rows)} fixtures through the proxy ({sum(1 for r in rows if r.client == 'Claude Code')} Claude Code, "
               f"{sum(1 for r in rows if r.client == 'Codex CLI')} Codex), {len(rows) - len(failed)} passing every check; "
               f"{sum(1 for r in rows if r.results.get('compact mode') is True)} compacted by the proxy and accepted, "
               f"{sum(1 for r in rows if r.results.get('compact mode') == 'deferred')} deferred (forwarded as they came) "
               "where the pipeline meets no budget tried (the table says why).")
    print()
    print(table(rows))
    for r in rows:
        if r.details:
            harness.log(f"details {r.fixture}: " + " / ".join(r.details))
    harness.log(f"\n{summary} Total {time.time() - t0:.0f}s.")
    if not a.only:
        write_docs(rows, a.docs, summary)
        harness.log(f"wrote {a.docs.relative_to(ROOT)}")
    for r in failed:
        harness.log(f"FAILED: {r.fixture}: {r.error or ' / '.join(r.details)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
