//! rig-memory's policies and cutpoint's side by side, in one process, on the same
//! histories, each output judged by the one [checker](crate::check::check). For this crate's
//! tests and the `side_by_side` example (not a stable API).

use std::fmt::Write as _;

use cutpoint::compact::pipeline::Preset;
use rig_core::completion::Message;
use rig_core::id::ConversationId;
use rig_memory::{
    CompactingMemory, ConversationMemory, HeuristicTokenCounter, InMemoryConversationMemory,
    MemoryPolicy, SlidingWindowMemory, TemplateCompactor, TokenWindowMemory,
};

use crate::check::{Checked, check};
use crate::policy::{CutpointPolicy, Settings};

/// A policy under comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Contender {
    /// rig-memory `SlidingWindowMemory::last_messages(n)`.
    Sliding(usize),
    /// rig-memory `TokenWindowMemory::new(budget, HeuristicTokenCounter::default())`.
    TokenWindow,
    /// rig-memory `CompactingMemory` over a token window of three quarters of the
    /// budget and a `TemplateCompactor` capped at the last quarter (about 4 bytes a
    /// token).
    Compacting,
    /// cutpoint's policy with a preset.
    Cutpoint(Preset),
}

impl Contender {
    /// Every contender: rig-memory's three, then cutpoint's presets.
    pub const ALL: [Contender; 6] = [
        Contender::Sliding(40),
        Contender::TokenWindow,
        Contender::Compacting,
        Contender::Cutpoint(Preset::Gentle),
        Contender::Cutpoint(Preset::Balanced),
        Contender::Cutpoint(Preset::Aggressive),
    ];

    /// Its name in the table. **O(1)**.
    pub fn name(self) -> String {
        match self {
            Contender::Sliding(n) => format!("rig-memory SlidingWindowMemory({n})"),
            Contender::TokenWindow => "rig-memory TokenWindowMemory".to_owned(),
            Contender::Compacting => "rig-memory CompactingMemory+TemplateCompactor".to_owned(),
            Contender::Cutpoint(p) => format!("cutpoint {p}"),
        }
    }

    /// The output for `messages` under `budget`: **what the policy costs**.
    ///
    /// # Errors
    /// The policy's error, as text.
    pub fn run(self, messages: &[Message], budget: u64) -> Result<Vec<Message>, String> {
        let counter = HeuristicTokenCounter::default;
        let m = messages.to_vec();
        let out = match self {
            Contender::Sliding(n) => SlidingWindowMemory::last_messages(n).apply(m),
            Contender::TokenWindow => TokenWindowMemory::new(budget as usize, counter()).apply(m),
            Contender::Compacting => {
                let memory = CompactingMemory::new(
                    InMemoryConversationMemory::new(),
                    TokenWindowMemory::new((budget * 3 / 4) as usize, counter()),
                    TemplateCompactor::new().with_max_bytes(budget as usize),
                );
                let id = ConversationId::new("side-by-side");
                futures::executor::block_on(async {
                    memory.append(&id, m).await?;
                    memory.load(&id).await
                })
            }
            Contender::Cutpoint(p) => {
                CutpointPolicy::with_settings(Settings::new(budget).preset(p)).apply(m)
            }
        };
        out.map_err(|e| e.to_string())
    }
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Row {
    /// The history's name.
    pub history: String,
    /// The budget.
    pub budget: u64,
    /// Who.
    pub contender: Contender,
    /// The checker's verdict, or the policy's error.
    pub checked: Result<Checked, String>,
}

/// Every contender on `messages`. **What the policies cost, plus the checker.**
pub fn rows(history: &str, messages: &[Message], budget: u64) -> Vec<Row> {
    let counter = HeuristicTokenCounter::default();
    Contender::ALL
        .into_iter()
        .map(|contender| Row {
            history: history.to_owned(),
            budget,
            contender,
            checked: contender
                .run(messages, budget)
                .map(|out| check(messages, &out, budget, &counter)),
        })
        .collect()
}

/// The rows as a markdown table. **O(rows)**.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| history | budget | policy | messages in → out | tokens out | budget met | broken pairs | pending calls dropped | calls removed | their arguments lost |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = match &r.checked {
            Ok(c) => writeln!(
                s,
                "| {} | {} | {} | {} → {} | {} | {} | {} | {} | {} | {} |",
                r.history,
                r.budget,
                r.contender.name(),
                c.messages_in,
                c.messages_out,
                c.tokens_out,
                if c.budget_met { "yes" } else { "**no**" },
                c.broken_pairs,
                c.pending_dropped,
                c.calls_removed,
                c.arguments_lost,
            ),
            Err(e) => writeln!(
                s,
                "| {} | {} | {} | refused: {} | | | | | | |",
                r.history,
                r.budget,
                r.contender.name(),
                e.replace('|', "/")
            ),
        };
    }
    s
}
