//! The command line (feature `cli`): argument parsing, logging and ctrl-c around
//! [`serve`](crate::serve), shared by the `cutpoint-proxy` binary and the CLI's
//! `cutpoint proxy` (the CLI's feature `proxy`).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use std::time::Duration;

use crate::{
    Compaction, Config, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_SESSION_BYTES, DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_TOTAL_BYTES, Mode, Proxy,
};
use clap::{Parser, ValueEnum};
use cutpoint::compact::pipeline::{Preset, Settings};

/// Check every request an agent sends its provider by the provider's tool-call rules,
/// and compact it at a legal cut over a budget; stream the answers back unchanged.
#[derive(Parser, Debug)]
#[command(name = "cutpoint-proxy", version, about, long_about = None)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// The provider's base URL, e.g. <https://api.anthropic.com> or <https://api.openai.com>.
    #[arg(long, value_name = "URL")]
    upstream: http::Uri,
    /// check: refuse a request that breaks a provider rule (400 in the provider's
    /// error shape), forward the rest unchanged. repair: as check, but answer an
    /// unanswered call with an aborted result and drop a result whose call is
    /// nowhere, when that fixes the request, and forward the fix. compact: check,
    /// and compact a request over --budget with the pipeline before forwarding it.
    #[arg(long, value_enum, default_value_t = ModeArg::Check)]
    mode: ModeArg,
    /// compact: tokens the live history must fit in [default with --context-window:
    /// the window less --max-output].
    #[arg(long, value_name = "TOKENS")]
    budget: Option<u64>,
    /// compact: the model's context window, in tokens.
    #[arg(long, value_name = "N", requires = "max_output")]
    context_window: Option<u64>,
    /// compact: the most tokens the model may output.
    #[arg(long, value_name = "N", requires = "context_window")]
    max_output: Option<u64>,
    /// compact: the pipeline's preset, gentle, balanced or aggressive [default:
    /// balanced].
    #[arg(long, value_name = "PRESET", value_parser = parse_preset)]
    preset: Option<Preset>,
    /// The largest request body read, in bytes; a larger one is answered 413.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// The most sessions remembered (a session's next request is read only where it
    /// is new; in compact mode it continues what the proxy forwarded), the least
    /// recently used evicted first; 0: none.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SESSIONS)]
    max_sessions: usize,
    /// The most bytes one session remembers (an estimate of its history and its
    /// reading); a larger one is not remembered.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_SESSION_BYTES)]
    max_session_bytes: usize,
    /// The most bytes all sessions remember together (the same estimate); the least
    /// recently used are evicted to stay within it.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_SESSIONS_TOTAL_BYTES)]
    max_sessions_total_bytes: usize,
    /// Seconds the upstream has to accept a connection; past them the request is
    /// answered 504 in the provider's error shape. 0: no limit.
    #[arg(long, value_name = "SECS", value_parser = parse_secs, default_value = CONNECT_TIMEOUT_SECS)]
    connect_timeout: Timeout,
    /// Seconds the upstream has to start its response (status and headers) once the
    /// request is sent; past them, 504. A streamed body is never timed. 0: no limit.
    #[arg(long, value_name = "SECS", value_parser = parse_secs, default_value = FIRST_BYTE_TIMEOUT_SECS)]
    first_byte_timeout: Timeout,
}

/// A `--*-timeout`: a duration, or none (0).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Timeout(Option<Duration>);

/// [`DEFAULT_CONNECT_TIMEOUT`](crate::DEFAULT_CONNECT_TIMEOUT) as
/// `--connect-timeout` reads it.
const CONNECT_TIMEOUT_SECS: &str = "10";
/// [`DEFAULT_FIRST_BYTE_TIMEOUT`](crate::DEFAULT_FIRST_BYTE_TIMEOUT) as
/// `--first-byte-timeout` reads it.
const FIRST_BYTE_TIMEOUT_SECS: &str = "600";

/// Seconds (a decimal), 0 for no limit.
fn parse_secs(text: &str) -> Result<Timeout, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    match secs {
        0.0 => Ok(Timeout(None)),
        s if s.is_finite() && s > 0.0 => Ok(Timeout(Some(Duration::from_secs_f64(s)))),
        _ => Err(format!("{text:?} is not a number of seconds")),
    }
}

/// `--mode`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
enum ModeArg {
    /// Refuse what breaks a rule.
    Check,
    /// Fix what can be fixed without losing a call; refuse the rest.
    Repair,
    /// Check, and compact over the budget.
    Compact,
}

impl ModeArg {
    /// The mode as `--mode` names it. **O(1)**.
    fn name(self) -> &'static str {
        match self {
            ModeArg::Check => "check",
            ModeArg::Repair => "repair",
            ModeArg::Compact => "compact",
        }
    }
}

fn parse_preset(name: &str) -> Result<Preset, String> {
    Preset::from_name(name).ok_or_else(|| {
        format!(
            "unknown preset {name:?}; one of: {}",
            Preset::ALL.map(Preset::name).join(", ")
        )
    })
}

/// Runs the proxy the arguments describe until ctrl-c, then lets the streams in
/// flight finish. Exit status: 0 after a shutdown; 2 on bad arguments; 1 when the
/// address cannot be listened on.
pub fn run(args: Args) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init()
        .ok();
    // The compact mode's flags, given in another mode, are refused by name: the
    // proxy would otherwise run unasked in check or repair mode, never compacting.
    if args.mode != ModeArg::Compact {
        let given = [
            ("--budget", args.budget.is_some()),
            ("--context-window", args.context_window.is_some()),
            ("--max-output", args.max_output.is_some()),
            ("--preset", args.preset.is_some()),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, on)| *on) {
            eprintln!(
                "cutpoint-proxy: {flag} applies to --mode compact, and the mode is {}",
                args.mode.name()
            );
            return ExitCode::from(2);
        }
    }
    let mut config = Config::new(args.upstream.clone());
    config.max_body_bytes = args.max_body_bytes;
    config.max_sessions = args.max_sessions;
    config.max_session_bytes = args.max_session_bytes;
    config.max_sessions_total_bytes = args.max_sessions_total_bytes;
    config.connect_timeout = args.connect_timeout.0;
    config.first_byte_timeout = args.first_byte_timeout.0;
    if args.mode == ModeArg::Repair {
        config.mode = Mode::Repair;
    }
    if args.mode == ModeArg::Compact {
        let mut settings = Settings::new();
        settings.budget = args.budget;
        settings.context_window = args.context_window;
        settings.max_output = args.max_output;
        settings.preset = args.preset;
        match Compaction::new(&settings) {
            Ok(c) => config.mode = Mode::Compact(Box::new(c)),
            Err(e) => {
                eprintln!("cutpoint-proxy: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let proxy = match Proxy::new(config) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            eprintln!("cutpoint-proxy: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cutpoint-proxy: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let listener = match tokio::net::TcpListener::bind(args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("cutpoint-proxy: cannot listen on {}: {e}", args.listen);
                return ExitCode::FAILURE;
            }
        };
        tracing::info!(listen = %args.listen, upstream = %args.upstream, "cutpoint-proxy listening");
        let shutdown = async {
            // No ctrl-c handler to be had: run until killed.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        match crate::serve(listener, proxy, shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cutpoint-proxy: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_FIRST_BYTE_TIMEOUT};

    #[test]
    fn timeouts_read_as_seconds_and_default_to_the_library_s() {
        assert_eq!(
            parse_secs(CONNECT_TIMEOUT_SECS),
            Ok(Timeout(Some(DEFAULT_CONNECT_TIMEOUT)))
        );
        assert_eq!(
            parse_secs(FIRST_BYTE_TIMEOUT_SECS),
            Ok(Timeout(Some(DEFAULT_FIRST_BYTE_TIMEOUT)))
        );
        assert_eq!(
            parse_secs("0.25"),
            Ok(Timeout(Some(Duration::from_millis(250))))
        );
        assert_eq!(parse_secs("0"), Ok(Timeout(None)));
        assert!(parse_secs("-1").is_err() && parse_secs("soon").is_err());
        assert!(parse_secs("inf").is_err() && parse_secs("NaN").is_err());
        let args = Args::try_parse_from(["cutpoint-proxy", "--upstream", "http://x"]).unwrap();
        assert_eq!(
            (args.connect_timeout.0, args.first_byte_timeout.0),
            (
                Some(DEFAULT_CONNECT_TIMEOUT),
                Some(DEFAULT_FIRST_BYTE_TIMEOUT)
            )
        );
        let args = Args::try_parse_from([
            "cutpoint-proxy",
            "--upstream",
            "http://x",
            "--first-byte-timeout",
            "0",
        ])
        .unwrap();
        assert_eq!(args.first_byte_timeout, Timeout(None));
    }
}
