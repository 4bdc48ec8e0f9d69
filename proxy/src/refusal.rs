//! A request the proxy answers itself, in the error shape of the provider it was
//! meant for, so that the agent's SDK reads it as that provider's own error.

use bytes::Bytes;
use http::StatusCode;
use serde_json::json;

use crate::Route;

/// Why a request was answered by the proxy instead of forwarded.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Refusal {
    /// The status answered: 400 for a broken rule or an unreadable body, 413 for a
    /// body over the cap, 415 for a compressed one, 500 when the check itself failed.
    pub status: StatusCode,
    /// What was wrong, for the metrics' label and the `x-cutpoint-refused` header:
    /// a provider rule's name ([`Rule::name`](cutpoint::format::Rule::name)), or one
    /// of `invalid-json`, `invalid-request`, `not-utf8`, `body-too-large`,
    /// `content-encoding`, `body-read-error`, `internal-error` (500: the check itself
    /// failed, a bug); `upstream-unreachable` for the 502 of an
    /// upstream that could not be reached (counted as an upstream error, not a
    /// refusal).
    pub reason: &'static str,
    /// The message, as the provider's error `message`.
    pub message: String,
}

impl Refusal {
    /// A refusal with status 400.
    pub(crate) fn bad_request(reason: &'static str, message: String) -> Self {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            reason,
            message,
        }
    }

    /// The body in `route`'s provider error shape: Anthropic
    /// `{"type":"error","error":{"type":...,"message":...}}`, OpenAI
    /// `{"error":{"message":...,"type":...,"param":null,"code":...}}` with the reason
    /// as `code`. **O(len(message))**.
    pub fn body(&self, route: Route) -> Bytes {
        let value = if route.is_anthropic() {
            let kind = match self.status {
                StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
                _ => "invalid_request_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": self.message}})
        } else {
            json!({"error": {
                "message": self.message,
                "type": "invalid_request_error",
                "param": null,
                "code": self.reason,
            }})
        };
        Bytes::from(value.to_string())
    }
}
