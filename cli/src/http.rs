//! The HTTP/1.1 server under `serve`: hyper on a small Tokio runtime, the handler on Tokio's
//! blocking pool (it reads and writes stores), so that a slow or stuck client holds only its own
//! connection. Every read and write is bounded in time (Jetty's 30 s idle timeout, as a Connect
//! worker's REST server) and in size (an 8 KiB head, as Jetty's default, answered 431 beyond it; a
//! body refused with 413 from its declared length, before a byte of it is read). hyper does the
//! framing: keep-alive, `Expect: 100-continue`, chunked bodies, absolute-form targets, `HEAD`.

use std::io;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt as _;
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;

/// Limits of one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The longest wait for a client's next bytes, and for it to take ours.
    pub idle: Duration,
    /// The longest a request's body may take to arrive once its head has.
    pub request: Duration,
    /// Request line and headers together (hyper's read buffer: 8 KiB at least).
    pub head_bytes: usize,
    pub body_bytes: u64,
    /// Connections served at once; more are answered 503 and closed.
    pub connections: usize,
}

/// A request as the handler sees it.
#[derive(Debug)]
pub(crate) struct Request {
    /// Upper case; `HEAD` arrives as `GET`.
    pub method: String,
    /// The path and query (an absolute-form target reduced to them).
    pub target: String,
    /// The media type of the body, without parameters, lower case.
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// An answer.
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// The `Allow` header (a 405 must carry one, as must an answer to `OPTIONS`).
    pub allow: Option<&'static str>,
}

impl Response {
    pub(crate) fn error(status: u16, message: &str) -> Response {
        Response {
            status,
            content_type: "application/json",
            body: format!(
                "{{\"error_code\":{status},\"message\":{}}}",
                super::quoted(message)
            ),
            allow: None,
        }
    }
}

type Handler = dyn Fn(Request) -> Response + Send + Sync;

/// Serves `listener` until it fails.
pub(crate) fn serve(
    listener: TcpListener,
    limits: Limits,
    handler: Arc<Handler>,
) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("serve")
        .enable_all()
        .build()?;
    runtime.block_on(accept(listener, limits, handler))
}

async fn accept(listener: TcpListener, limits: Limits, handler: Arc<Handler>) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let open = Arc::new(Semaphore::new(limits.connections));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // A connection reset before it was accepted, or out of descriptors for a moment.
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let mut stream = TimeoutStream::new(stream);
        stream.set_read_timeout(Some(limits.idle));
        stream.set_write_timeout(Some(limits.idle));
        let Ok(slot) = Arc::clone(&open).try_acquire_owned() else {
            tokio::spawn(refuse_busy(stream));
            continue;
        };
        let handler = Arc::clone(&handler);
        tokio::spawn(async move {
            let _slot = slot;
            let service = service_fn(move |request| respond(request, limits, Arc::clone(&handler)));
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.idle)
                // As Jetty writes them (`Content-Type`, `Allow`): some clients match names exactly.
                .title_case_headers(true)
                .max_buf_size(limits.head_bytes)
                .serve_connection(TokioIo::new(Box::pin(stream)), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
}

/// The connection cap reached: a 503, written and closed without reading the request.
async fn refuse_busy(stream: TimeoutStream<tokio::net::TcpStream>) {
    let mut stream = Box::pin(stream);
    let body = Response::error(503, "too many connections; retry later").body;
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}

type Answer = hyper::Response<Full<Bytes>>;

async fn respond(
    request: hyper::Request<Incoming>,
    limits: Limits,
    handler: Arc<Handler>,
) -> Result<Answer, std::convert::Infallible> {
    Ok(match read(request, limits).await {
        Ok(request) => {
            let head_only = request.method == "HEAD";
            let request = Request {
                method: if head_only {
                    "GET".into()
                } else {
                    request.method
                },
                ..request
            };
            match tokio::task::spawn_blocking(move || handler(request)).await {
                Ok(response) => answer(&response, head_only, false),
                Err(e) => answer(
                    &Response::error(500, &format!("the request failed: {e}")),
                    false,
                    false,
                ),
            }
        }
        // The body was not read to its end: the connection cannot carry another request.
        Err(refused) => answer(&refused, false, true),
    })
}

/// The request with its whole body, or the refusal to answer with.
async fn read(request: hyper::Request<Incoming>, limits: Limits) -> Result<Request, Response> {
    let (head, body) = request.into_parts();
    let declared = head
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.body_bytes) {
        return Err(too_large(limits));
    }
    let body = Limited::new(body, limits.body_bytes as usize);
    let body = match tokio::time::timeout(limits.request, body.collect()).await {
        Err(_) => {
            return Err(Response::error(
                408,
                "the request body did not arrive in time",
            ));
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large(limits)),
        Ok(Err(e)) => {
            return Err(Response::error(
                400,
                &format!("cannot read the request body: {e}"),
            ));
        }
        Ok(Ok(collected)) => collected.to_bytes().to_vec(),
    };
    let target = head
        .uri
        .path_and_query()
        .map_or_else(|| head.uri.path().to_string(), |p| p.as_str().to_string());
    let content_type = head
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
    Ok(Request {
        method: head.method.as_str().to_ascii_uppercase(),
        target,
        content_type,
        body,
    })
}

fn too_large(limits: Limits) -> Response {
    Response::error(
        413,
        &format!(
            "the request body is larger than {} bytes",
            limits.body_bytes
        ),
    )
}

fn answer(r: &Response, head_only: bool, close: bool) -> Answer {
    let body = if head_only {
        Bytes::new()
    } else {
        Bytes::from(r.body.clone())
    };
    let mut out = hyper::Response::new(Full::new(body));
    *out.status_mut() =
        hyper::StatusCode::from_u16(r.status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = out.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(r.content_type),
    );
    // A HEAD answer carries the length a GET's body would have.
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(r.body.len()));
    if let Some(allow) = r.allow {
        headers.insert(header::ALLOW, HeaderValue::from_static(allow));
    }
    if close {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    out
}
