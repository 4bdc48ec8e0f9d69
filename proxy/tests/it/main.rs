//! The proxy over loopback only: a stand-in upstream (hyper) that records what it
//! receives, the proxy in front of it, a hyper client as the agent. Never a real
//! provider.

mod check;
#[cfg(feature = "cli")]
mod cli;
mod compact;
mod hostile;
mod incremental;
mod load;
#[cfg(all(feature = "cli", target_os = "linux"))]
mod memory;
mod passthrough;
mod repair;
mod sessions;
mod support;
