//! The HTTP/1.1 server under `serve`: hyper on a small Tokio runtime, the handler on Tokio's
//! blocking pool (it reads and writes stores), so that a slow or stuck client holds only its own
//! connection. Every read and write is bounded in time (Jetty's 30 s idle timeout, as a Connect
//! worker's REST server) and in size (an 8 KiB head, as Jetty's default, answered 431 beyond it; a
//! body refused with 413 from its declared length, before a byte of it is read). hyper does the
//! framing: keep-alive, `Expect: 100-continue`, chunked bodies, absolute-form targets, `HEAD`;
//! rustls the encryption, when the server is given a certificate.

use std::io;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncWriteExt as _;
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;
use tokio_rustls::TlsAcceptor;

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
    /// Every header, its name in lower case (a repeated one appears once per line).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of header `name` (lower case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An answer.
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// The `Allow` header (a 405 must carry one, as must an answer to `OPTIONS`).
    pub allow: Option<&'static str>,
    /// Other headers of the answer.
    pub headers: Vec<(&'static str, String)>,
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
            headers: Vec::new(),
        }
    }
}

type Handler = dyn Fn(Request) -> Response + Send + Sync;

/// A TLS server configuration from a PEM certificate chain and its private key.
pub(crate) fn tls_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            format!(
                "--tls-cert {}: not a PEM certificate chain: {e}",
                cert.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "--tls-cert {}: holds no certificate",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("--tls-key {}: not a PEM private key: {e}", key.display()))?;
    // ring rather than aws-lc-rs: no CMake build. Its provider lacks post-quantum key exchange,
    // which rustls flags as deprecated; an operator's console does not need it yet.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-cert and --tls-key do not make a certificate: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `listener` until it fails, over TLS when `tls` is given.
pub(crate) fn serve(
    listener: TcpListener,
    limits: Limits,
    tls: Option<Arc<ServerConfig>>,
    handler: Arc<Handler>,
) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("serve")
        .enable_all()
        .build()?;
    runtime.block_on(accept(
        listener,
        limits,
        tls.map(TlsAcceptor::from),
        handler,
    ))
}

async fn accept(
    listener: TcpListener,
    limits: Limits,
    tls: Option<TlsAcceptor>,
    handler: Arc<Handler>,
) -> io::Result<()> {
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
        let stream = Box::pin(stream);
        let Ok(slot) = Arc::clone(&open).try_acquire_owned() else {
            // Over TLS a plain answer would not be read: the connection just closes.
            if tls.is_none() {
                tokio::spawn(refuse_busy(stream));
            }
            continue;
        };
        let handler = Arc::clone(&handler);
        let tls = tls.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match tls {
                None => connection(stream, limits, handler).await,
                Some(tls) => match tokio::time::timeout(limits.idle, tls.accept(stream)).await {
                    Ok(Ok(stream)) => connection(stream, limits, handler).await,
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!("TLS handshake timed out"),
                },
            }
        });
    }
}

/// Serves one connection's requests.
async fn connection<S>(stream: S, limits: Limits, handler: Arc<Handler>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| respond(request, limits, Arc::clone(&handler)));
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle)
        // As Jetty writes them (`Content-Type`, `Allow`): some clients match names exactly.
        .title_case_headers(true)
        .max_buf_size(limits.head_bytes)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(error = %e, "connection ended");
    }
}

/// The connection cap reached: a 503, written and closed without reading the request.
async fn refuse_busy(mut stream: std::pin::Pin<Box<TimeoutStream<tokio::net::TcpStream>>>) {
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
    let headers = head
        .headers
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    Ok(Request {
        method: head.method.as_str().to_ascii_uppercase(),
        target,
        content_type,
        headers,
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
    for (name, value) in &r.headers {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.append(*name, value);
        }
    }
    if close {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    out
}
