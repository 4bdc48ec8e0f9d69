//! The stand-in upstream, the proxy on a loopback socket, and a client.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use cutpoint_proxy::{Config, Proxy};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// What the stand-in upstream received: one request, whole.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub(crate) method: http::Method,
    /// Path and query.
    pub(crate) path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// A body the stand-in answers with.
pub(crate) type Reply = UnsyncBoxBody<Bytes, Infallible>;

/// A whole reply body.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Reply {
    Full::new(bytes.into()).boxed_unsync()
}

type Responder = dyn Fn(&Received) -> Response<Reply> + Send + Sync;

/// A loopback HTTP/1.1 server that records every request and answers with its
/// responder.
pub(crate) struct StandIn {
    pub(crate) addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
}

impl StandIn {
    /// Starts one, answering every request with `respond`.
    pub(crate) async fn start(
        respond: impl Fn(&Received) -> Response<Reply> + Send + Sync + 'static,
    ) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let received = Arc::new(Mutex::new(Vec::new()));
        let respond: Arc<Responder> = Arc::new(respond);
        let log = Arc::clone(&received);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (log, respond) = (Arc::clone(&log), Arc::clone(&respond));
                let service = service_fn(move |req: Request<Incoming>| {
                    let (log, respond) = (Arc::clone(&log), Arc::clone(&respond));
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body
                            .collect()
                            .await
                            .map(|c| c.to_bytes())
                            .unwrap_or_default();
                        let got = Received {
                            method: parts.method,
                            path: parts
                                .uri
                                .path_and_query()
                                .map(ToString::to_string)
                                .unwrap_or_default(),
                            headers: parts.headers,
                            body,
                        };
                        let response = respond(&got);
                        log.lock().unwrap().push(got);
                        Ok::<_, Infallible>(response)
                    }
                });
                tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
            }
        });
        StandIn { addr, received }
    }

    /// Starts one answering 200 with `body` as JSON.
    pub(crate) async fn json(body: &'static str) -> StandIn {
        StandIn::start(move |_| {
            Response::builder()
                .header("content-type", "application/json")
                .body(full(body))
                .unwrap()
        })
        .await
    }

    /// What it received so far.
    pub(crate) fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The config of a proxy in check mode in front of it.
    pub(crate) fn config(&self) -> Config {
        Config::new(format!("http://{}", self.addr).parse().unwrap())
    }
}

/// The proxy serving on a loopback socket until stopped.
pub(crate) struct Running {
    pub(crate) addr: SocketAddr,
    pub(crate) proxy: Arc<Proxy>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Running {
    pub(crate) async fn start(config: Config) -> Running {
        let proxy = Arc::new(Proxy::new(config).expect("proxy"));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(cutpoint_proxy::serve(listener, Arc::clone(&proxy), async {
            let _ = stopped.await;
        }));
        Running {
            addr,
            proxy,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Asks it to shut down (it waits for connections in flight).
    pub(crate) fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Waits for it to have shut down.
    pub(crate) async fn stopped(&mut self) -> std::io::Result<()> {
        self.stop();
        match self.task.take() {
            Some(task) => task.await.expect("serve task"),
            None => Ok(()),
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// The agent's side: a plain HTTP/1.1 client.
pub(crate) fn client<B>() -> Client<HttpConnector, B>
where
    B: hyper::body::Body + Send + 'static + Unpin,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Client::builder(TokioExecutor::new()).build_http()
}

/// An answer, whole.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Answer {
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON answer")
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// POSTs `body` to the proxy's `path` with `headers`, and reads the answer whole.
pub(crate) async fn post(
    proxy: &Running,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Answer {
    let mut req = Request::post(proxy.url(path)).header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(body.into())).unwrap();
    let response = client().request(req).await.expect("the proxy answers");
    whole(response).await
}

/// Reads a response whole.
pub(crate) async fn whole(response: Response<Incoming>) -> Answer {
    let (parts, body) = response.into_parts();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.expect("the body").to_bytes(),
    }
}

/// A fixture of `proxy/tests/fixtures`.
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A well-formed Anthropic Messages request with one answered tool call.
pub(crate) const ANTHROPIC_OK: &str = r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"What is the weather in Paris?"},{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":"18C, cloudy"}]}]}"#;

/// The same with the tool_result gone: the tool_use at messages.1 is unanswered.
pub(crate) const ANTHROPIC_BROKEN: &str = r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"What is the weather in Paris?"},{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":"Never mind, what about Rome?"}]}"#;

/// A well-formed OpenAI Chat request with one answered call.
pub(crate) const CHAT_OK: &str = r#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_abc","content":"18C"}]}"#;

/// The same with the tool message gone: call_abc at messages.1 is unanswered.
pub(crate) const CHAT_BROKEN: &str = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"user","content":"Hello?"}]}"#;
