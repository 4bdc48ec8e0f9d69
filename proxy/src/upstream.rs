//! The upstream side: one pooled HTTP/1.1 client (TLS by rustls with the ring
//! provider and the Mozilla roots), the request's URL moved onto the upstream's, the
//! hop-by-hop headers dropped, the answer streamed back unchanged.

use std::time::Duration;

use http::header::{self, HeaderMap, HeaderValue};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri};
use http_body_util::BodyExt;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::ProxyBody;

/// Why the upstream cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The upstream URL lacks a scheme or a host, or has a scheme other than http(s).
    #[error("the upstream URL {0:?} needs http:// or https:// and a host")]
    Url(String),
    /// TLS could not be set up.
    #[error("TLS setup failed: {0}")]
    Tls(#[from] rustls::Error),
}

/// Why a request could not be sent upstream, or got no answer in time.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// No connection within the connect timeout, or no response (status line and
    /// headers) within the first-byte timeout after the request was sent.
    #[error("no {what} from the upstream within {after:?}")]
    Timeout {
        /// `"connection"` or `"response"`.
        what: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// Any other failure: refused, reset, TLS, a malformed answer.
    #[error(transparent)]
    Failed(hyper_util::client::legacy::Error),
}

/// How long the upstream may take: to accept a connection (TCP, per address tried
/// for one lookup, as hyper-util splits it), and to start its response once the
/// request is sent. `None`: no limit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Timeouts {
    pub(crate) connect: Option<Duration>,
    pub(crate) first_byte: Option<Duration>,
}

/// The upstream: where to send, and the client to send with.
#[derive(Debug)]
pub(crate) struct Upstream {
    scheme: Scheme,
    authority: Authority,
    /// The base path, without a trailing `/` (empty for none).
    prefix: String,
    client: Client<HttpsConnector<HttpConnector>, ProxyBody>,
    timeouts: Timeouts,
}

/// Headers of one connection, not of the request (RFC 9110, 7.6.1), and `host`,
/// which is the upstream's.
const HOP_BY_HOP: [header::HeaderName; 8] = [
    header::CONNECTION,
    header::HOST,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Drops the hop-by-hop headers, and those `connection` names. **O(headers)**.
fn drop_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .collect();
    for name in &named {
        headers.remove(name.as_str());
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
}

/// The TCP connector under TLS, as hyper-rustls builds it (`https_or_http` checks
/// the scheme), with `TCP_NODELAY`: the request goes out when written, not held back
/// for the ACK of its previous segment (Nagle's algorithm); and the connect timeout.
/// **O(1)**.
fn tcp(connect_timeout: Option<Duration>) -> HttpConnector {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(connect_timeout);
    http
}

/// Whether `e` is the connector's timeout (an I/O `TimedOut` in its sources).
/// **O(depth)**.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(e);
    while let Some(e) = at {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        at = e.source();
    }
    false
}

impl Upstream {
    /// The client for `base`. **O(roots)**.
    pub(crate) fn new(base: &Uri, timeouts: Timeouts) -> Result<Self, UpstreamError> {
        let bad = || UpstreamError::Url(base.to_string());
        let scheme = base.scheme().cloned().ok_or_else(bad)?;
        if scheme != Scheme::HTTP && scheme != Scheme::HTTPS {
            return Err(bad());
        }
        let authority = base.authority().cloned().ok_or_else(bad)?;
        let prefix = base.path().trim_end_matches('/').to_owned();
        let https = HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())?
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp(timeouts.connect));
        Ok(Upstream {
            scheme,
            authority,
            prefix,
            client: Client::builder(TokioExecutor::new()).build(https),
            timeouts,
        })
    }

    /// Sends `parts` with `body` upstream: the path and query appended to the base,
    /// the end-to-end headers as they came (a `read` body's `content-length` left to
    /// the client, which knows its length). The answer's body is the upstream's,
    /// streamed; only its start (status and headers) is awaited within the
    /// first-byte timeout, never the body. **O(headers)** here; the body flows as it
    /// arrives.
    pub(crate) async fn send(
        &self,
        mut parts: http::request::Parts,
        body: ProxyBody,
        read: bool,
    ) -> Result<Response<ProxyBody>, SendError> {
        let path = parts.uri.path_and_query().map_or("/", PathAndQuery::as_str);
        let uri = Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(format!("{}{path}", self.prefix))
            .build()
            // The parts come from a valid URI and a valid base: cannot fail; if it
            // did, the base alone.
            .unwrap_or_else(|_| Uri::from(self.authority.clone()));
        parts.uri = uri;
        parts.version = http::Version::HTTP_11;
        drop_hop_by_hop(&mut parts.headers);
        if read {
            parts.headers.remove(header::CONTENT_LENGTH);
        }
        if let Ok(host) = HeaderValue::from_str(self.authority.as_str()) {
            parts.headers.insert(header::HOST, host);
        }
        let sent = self.client.request(Request::from_parts(parts, body));
        let answered = match self.timeouts.first_byte {
            Some(after) => {
                tokio::time::timeout(after, sent)
                    .await
                    .map_err(|_| SendError::Timeout {
                        what: "response",
                        after,
                    })?
            }
            None => sent.await,
        };
        let response = answered.map_err(|e| match self.timeouts.connect {
            Some(after) if e.is_connect() && timed_out(&e) => SendError::Timeout {
                what: "connection",
                after,
            },
            _ => SendError::Failed(e),
        })?;
        let (mut parts, body) = response.into_parts();
        drop_hop_by_hop(&mut parts.headers);
        // The upstream's HTTP version is of its connection, not the agent's: hyper
        // answers the agent in the version it asked with.
        parts.version = http::Version::default();
        Ok(Response::from_parts(
            parts,
            body.map_err(Into::into).boxed_unsync(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_go_and_end_to_end_ones_stay() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-trace"),
        );
        h.insert("x-trace", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer sk-test"),
        );
        h.insert("x-api-key", HeaderValue::from_static("k"));
        drop_hop_by_hop(&mut h);
        assert_eq!(h.len(), 2);
        assert_eq!(h[header::AUTHORIZATION], "Bearer sk-test");
        assert_eq!(h["x-api-key"], "k");
    }

    #[test]
    fn an_upstream_needs_a_scheme_and_a_host() {
        let none = Timeouts {
            connect: None,
            first_byte: None,
        };
        assert!(Upstream::new(&Uri::from_static("https://api.anthropic.com"), none).is_ok());
        assert!(Upstream::new(&Uri::from_static("/v1"), none).is_err());
        assert!(Upstream::new(&Uri::from_static("ftp://example.com"), none).is_err());
    }
}
