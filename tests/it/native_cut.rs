//! The keep-recent cut for native compaction (`format::keep_recent_cut`) against a
//! naive oracle on every real transcript of the provider formats that compact
//! natively (Anthropic, Claude Code, OpenAI Responses, Codex), for a sweep of token
//! and turn amounts: the oracle checks each message boundary directly (pairs on one
//! side, no call open before it, not inside a bound message, the roles), with no
//! tracker.

use std::collections::HashMap;

use cutpoint::format::{
    Block, Format, Keep, NativeCompaction, NativeCutError, Role, Transcript, keep_recent_cut,
};

use crate::faults::transcript_cases;

/// Whether cut `c` meets the conditions, checked message by message.
fn valid(t: &Transcript, kind: NativeCompaction, c: usize) -> bool {
    let live = t.live_from();
    let n = t.messages.len();
    if c <= live || c >= n || t.messages[c].bound {
        return false;
    }
    // Each call with its first result: both before the cut or both after it.
    let mut calls: HashMap<&str, usize> = HashMap::new();
    let mut results: HashMap<&str, usize> = HashMap::new();
    for (i, m) in t.messages.iter().enumerate().skip(live) {
        for (_, id, _) in m.calls() {
            calls.entry(id.as_str()).or_insert(i);
        }
        for (_, id) in m.results() {
            results.entry(id.as_str()).or_insert(i);
        }
    }
    for (id, &u) in &calls {
        match results.get(id) {
            None if u < c => return false,
            Some(&r) if (u < c) != (r < c) => return false,
            _ => {}
        }
    }
    match kind {
        NativeCompaction::Anthropic => {
            let (first, last) = (&t.messages[c], &t.messages[c - 1]);
            first.role != last.role && first.role != Role::System
        }
        _ => true,
    }
}

fn oracle(t: &Transcript, kind: NativeCompaction, keep: Keep) -> Option<usize> {
    let n = t.messages.len();
    let live = t.live_from();
    if kind == NativeCompaction::OpenAi && t.messages.get(live).is_some_and(|m| m.has_compaction())
    {
        return Some(live);
    }
    let kept = |c: usize| t.messages[c..].iter().map(|m| m.tokens()).sum::<u64>();
    let limit = match keep {
        Keep::Tokens(_) => n,
        Keep::Turns(k) => {
            let starts: Vec<usize> = (live..n)
                .filter(|&i| {
                    t.messages[i].role == Role::User
                        && t.messages[i]
                            .blocks
                            .iter()
                            .any(|(b, _)| !matches!(b, Block::Result { .. }))
                })
                .collect();
            *starts.get(starts.len().checked_sub(k)?)?
        }
        _ => unreachable!(),
    };
    (0..=limit.min(n)).rev().find(|&c| {
        valid(t, kind, c)
            && match keep {
                Keep::Tokens(k) => kept(c) >= k,
                _ => true,
            }
    })
}

#[test]
fn the_keep_recent_cut_is_the_latest_cut_meeting_the_conditions() {
    let mut found = 0;
    let mut refused = 0;
    for case in transcript_cases() {
        let kind = match case.format {
            Format::AnthropicMessages | Format::ClaudeCode => NativeCompaction::Anthropic,
            Format::OpenAiResponses | Format::CodexRollout => NativeCompaction::OpenAi,
            _ => continue,
        };
        let t = case.read();
        let total = t.live_tokens();
        let mut keeps: Vec<Keep> = (0..=8).map(|k| Keep::Tokens(total * k / 8)).collect();
        keeps.extend((1..=4).map(Keep::Turns));
        for keep in keeps {
            let want = oracle(&t, kind, keep);
            match keep_recent_cut(&t, kind, keep) {
                Ok(got) => {
                    found += 1;
                    assert_eq!(Some(got.cut), want, "{} {keep:?}", case.name);
                    let kept: u64 = t.messages[got.cut..].iter().map(|m| m.tokens()).sum();
                    assert_eq!(got.kept_tokens, kept, "{}", case.name);
                    if let Keep::Tokens(k) = keep {
                        assert!(got.kept_tokens >= k, "{}", case.name);
                    }
                }
                Err(NativeCutError::NoCut { .. }) => {
                    refused += 1;
                    assert_eq!(want, None, "{} {keep:?}", case.name);
                }
                Err(e) => panic!("{}: {e}", case.name),
            }
        }
    }
    assert!(
        found > 20 && refused > 0,
        "{found} cuts, {refused} refusals"
    );
}

/// Anthropic: the first kept message never has the role of the last summarized one,
/// and is never a system message, even when that keeps more than asked.
#[test]
fn anthropic_keeps_from_a_change_of_role_and_never_from_a_system_message() {
    use cutpoint::format::{self, ByteEstimate};
    let read = |text: &str| format::read(text, Format::AnthropicMessages, &ByteEstimate).unwrap();
    let t = read(
        r#"[{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},
            {"role":"user","content":"q2"},{"role":"user","content":"q3"}]"#,
    );
    let cut = keep_recent_cut(&t, NativeCompaction::Anthropic, Keep::Tokens(1)).unwrap();
    assert_eq!(cut.cut, 2, "message 3 follows a user message");
    let t = read(
        r#"[{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},
            {"role":"user","content":"q2"},{"role":"assistant","content":"a2"},
            {"role":"system","content":"s"}]"#,
    );
    let cut = keep_recent_cut(&t, NativeCompaction::Anthropic, Keep::Tokens(1)).unwrap();
    assert_eq!(cut.cut, 3, "message 4 is a system message");
    // Nothing to keep from but the first message: refused, naming why.
    let t = read(r#"[{"role":"user","content":"q1"}]"#);
    let err = keep_recent_cut(&t, NativeCompaction::Anthropic, Keep::Turns(1)).unwrap_err();
    assert!(err.to_string().contains("no legal cut"), "{err}");
}
