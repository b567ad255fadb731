//! The small HTTP/1.1 server under `serve`: a thread per connection, so that a slow or stuck client
//! holds only its own; every read and write bounded in time (Jetty's 30 s idle timeout, as a Connect
//! worker's REST server) and in size (an 8 KiB head, as Jetty's default; a body refused with 413 from
//! its declared length, before a byte of it is read). Keep-alive, `Expect: 100-continue`, chunked
//! bodies and absolute-form targets as RFC 9112 asks; `HEAD` answers as `GET` without the body.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Limits of one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The longest wait for a client's next bytes, and for it to take ours.
    pub idle: Duration,
    /// The longest a request may take to arrive once it has started.
    pub request: Duration,
    /// Request line and headers together.
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

/// Serves `listener` until it fails; each connection on its own thread.
pub(crate) fn serve(
    listener: TcpListener,
    limits: Limits,
    handler: Arc<Handler>,
) -> io::Result<()> {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            // A connection reset before it was accepted, or out of descriptors for a moment.
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let slot = Slot::take(&open);
        if open.load(Ordering::Acquire) > limits.connections {
            drop(slot);
            refuse_busy(stream, limits);
            continue;
        }
        let handler = Arc::clone(&handler);
        // The slot goes with the thread (or with the closure, if the thread never starts), and
        // is given back however it ends, a panic included.
        let spawned = std::thread::Builder::new()
            .name("serve-conn".into())
            .spawn(move || {
                let _slot = slot;
                if let Err(e) = connection(stream, limits, &*handler) {
                    tracing::debug!(error = %e, "connection ended");
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start a connection thread");
        }
    }
    Ok(())
}

/// One connection counted as open until dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(open: &Arc<AtomicUsize>) -> Slot {
        open.fetch_add(1, Ordering::AcqRel);
        Slot(Arc::clone(open))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn refuse_busy(stream: TcpStream, limits: Limits) {
    let _ = stream.set_write_timeout(Some(limits.idle));
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let r = Response::error(503, "too many connections; retry later");
    if write_response(&mut out, &r, true, false).is_ok() {
        drain(&mut BufReader::new(Timed {
            stream,
            deadline: None,
        }));
    }
}

/// Why a request could not be read: answered with `status` and the connection closed.
struct Refusal {
    status: u16,
    message: String,
}

fn refusal(status: u16, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
    }
}

fn connection(stream: TcpStream, limits: Limits, handler: &Handler) -> io::Result<()> {
    stream.set_read_timeout(Some(limits.idle))?;
    stream.set_write_timeout(Some(limits.idle))?;
    let mut out = stream.try_clone()?;
    let mut input = BufReader::new(Timed {
        stream,
        deadline: None,
    });
    loop {
        let head = match read_head(&mut input, limits) {
            Ok(Some(h)) => h,
            // Closed, or idle past the timeout between requests: nothing to answer.
            Ok(None) => return Ok(()),
            Err(r) => {
                let resp = Response::error(r.status, &r.message);
                write_response(&mut out, &resp, true, false)?;
                drain(&mut input);
                return Ok(());
            }
        };
        let body = match read_body(&mut input, &mut out, &head, limits) {
            Ok(b) => b,
            Err(r) => {
                let resp = Response::error(r.status, &r.message);
                write_response(&mut out, &resp, true, false)?;
                drain(&mut input);
                return Ok(());
            }
        };
        // Between requests only the idle timeout applies.
        input.get_mut().deadline = None;
        let head_only = head.method == "HEAD";
        let close = !head.keep_alive;
        let request = Request {
            method: if head_only { "GET".into() } else { head.method },
            target: head.target,
            content_type: head.content_type,
            body,
        };
        let response = handler(request);
        write_response(&mut out, &response, close, head_only)?;
        if close {
            return Ok(());
        }
    }
}

/// The socket as requests are read from it: past a request's deadline every read times out, so
/// that a client dripping a byte at a time (each within the idle timeout) cannot hold its thread.
struct Timed {
    stream: TcpStream,
    deadline: Option<Instant>,
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the request did not arrive within its time limit",
            ));
        }
        self.stream.read(buf)
    }
}

struct Head {
    method: String,
    target: String,
    keep_alive: bool,
    content_type: Option<String>,
    length: Option<u64>,
    chunked: bool,
    expect_continue: bool,
}

/// Reads one line of the head or of a chunked body's framing (CRLF or LF), counting it against
/// `budget`.
fn read_line(input: &mut BufReader<Timed>, budget: &mut usize) -> Result<Option<String>, Refusal> {
    let mut line = Vec::new();
    let n = input
        .by_ref()
        .take(*budget as u64 + 1)
        .read_until(b'\n', &mut line)
        .map_err(|e| refusal(408, format!("the request head did not arrive: {e}")))?;
    if n == 0 {
        return Ok(None);
    }
    if n > *budget {
        return Err(refusal(
            431,
            "the request line and headers (or a chunk's size line) are too large",
        ));
    }
    *budget -= n;
    if line.last() != Some(&b'\n') {
        return Err(refusal(400, "the request head ended before its blank line"));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| refusal(400, "the request head is not UTF-8"))
}

fn read_head(input: &mut BufReader<Timed>, limits: Limits) -> Result<Option<Head>, Refusal> {
    let mut budget = limits.head_bytes;
    // Blank lines before a request are ignored (RFC 9112 §2.2).
    let line = loop {
        match input.fill_buf() {
            Ok([]) => return Ok(None),
            Ok(_) => {}
            Err(e) if is_timeout(&e) => return Ok(None),
            Err(_) => return Ok(None),
        }
        // The request has begun: all of it must arrive within the request's limit.
        if input.get_ref().deadline.is_none() {
            input.get_mut().deadline = Some(Instant::now() + limits.request);
        }
        match read_line(input, &mut budget)? {
            None => return Ok(None),
            Some(l) if l.is_empty() => continue,
            Some(l) => break l,
        }
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(refusal(400, format!("malformed request line {line:?}")));
    };
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => {
            return Err(refusal(
                505,
                format!("HTTP version {version:?} is not supported"),
            ));
        }
    };
    let mut head = Head {
        method: method.to_ascii_uppercase(),
        target: origin_form(target)?,
        keep_alive: http11,
        content_type: None,
        length: None,
        chunked: false,
        expect_continue: false,
    };
    loop {
        let Some(line) = read_line(input, &mut budget)? else {
            return Err(refusal(400, "the request head ended before its blank line"));
        };
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(refusal(400, format!("malformed header line {line:?}")));
        };
        // A name is a token: no space before the colon, no line folded onto the one before
        // (RFC 9112 §5.1, §5.2), either of which a proxy could read differently.
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(refusal(400, format!("malformed header name in {line:?}")));
        }
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => {
                let n = digits(value, 10).ok_or_else(|| {
                    refusal(400, format!("Content-Length {value:?} is not a number"))
                })?;
                if head.length.is_some_and(|m| m != n) {
                    return Err(refusal(400, "two different Content-Length headers"));
                }
                head.length = Some(n);
            }
            "transfer-encoding" => {
                if !value.eq_ignore_ascii_case("chunked") {
                    return Err(refusal(
                        501,
                        format!("Transfer-Encoding {value:?} is not supported (only chunked)"),
                    ));
                }
                head.chunked = true;
            }
            "connection" => {
                for token in value.split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        head.keep_alive = false;
                    } else if token.eq_ignore_ascii_case("keep-alive") {
                        head.keep_alive = true;
                    }
                }
            }
            "content-type" => {
                let media = value.split(';').next().unwrap_or("").trim();
                head.content_type = Some(media.to_ascii_lowercase());
            }
            "expect" => {
                if !value.eq_ignore_ascii_case("100-continue") {
                    return Err(refusal(417, format!("Expect {value:?} is not supported")));
                }
                head.expect_continue = http11;
            }
            _ => {}
        }
    }
    if head.chunked && head.length.is_some() {
        // Either could be believed; a request carrying both is refused (RFC 9112 §6.3).
        return Err(refusal(400, "both Content-Length and Transfer-Encoding"));
    }
    Ok(Some(head))
}

/// The path and query of a request target; an absolute-form target keeps only those.
fn origin_form(target: &str) -> Result<String, Refusal> {
    if target.starts_with('/') {
        return Ok(target.to_string());
    }
    let lower = target.to_ascii_lowercase();
    let rest = ["http://", "https://"]
        .iter()
        .find_map(|s| lower.starts_with(s).then(|| &target[s.len()..]));
    match rest {
        Some(rest) => Ok(rest.find(['/', '?']).map_or_else(
            || "/".to_string(),
            |i| match &rest[i..] {
                q if q.starts_with('?') => format!("/{q}"),
                p => p.to_string(),
            },
        )),
        None if target == "*" => Ok("*".to_string()),
        None => Err(refusal(400, format!("malformed request target {target:?}"))),
    }
}

fn read_body(
    input: &mut BufReader<Timed>,
    out: &mut TcpStream,
    head: &Head,
    limits: Limits,
) -> Result<Vec<u8>, Refusal> {
    let too_large = || {
        refusal(
            413,
            format!(
                "the request body is larger than {} bytes",
                limits.body_bytes
            ),
        )
    };
    if head.length.is_some_and(|n| n > limits.body_bytes) {
        return Err(too_large());
    }
    if head.expect_continue && (head.chunked || head.length.is_some_and(|n| n > 0)) {
        out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .map_err(|e| refusal(400, format!("cannot answer Expect: {e}")))?;
    }
    let mut body = Vec::new();
    if let Some(n) = head.length {
        read_exact_by(input, &mut body, n)?;
    } else if head.chunked {
        loop {
            // Each framing line on its own budget: a body may be many small chunks.
            let mut budget = limits.head_bytes;
            let line = read_line(input, &mut budget)?
                .ok_or_else(|| refusal(400, "the chunked body ended before its last chunk"))?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = digits(size, 16)
                .ok_or_else(|| refusal(400, format!("malformed chunk size {size:?}")))?;
            if size == 0 {
                // Trailer fields, up to the blank line.
                while !read_line(input, &mut budget)?
                    .ok_or_else(|| refusal(400, "the chunked body ended in its trailer"))?
                    .is_empty()
                {}
                break;
            }
            if (body.len() as u64).saturating_add(size) > limits.body_bytes {
                return Err(too_large());
            }
            read_exact_by(input, &mut body, size)?;
            if read_line(input, &mut budget)?.as_deref() != Some("") {
                return Err(refusal(400, "a chunk is not followed by CRLF"));
            }
        }
    }
    Ok(body)
}

/// Appends exactly `n` bytes (within the body limit) of `input` to `body`.
fn read_exact_by(input: &mut BufReader<Timed>, body: &mut Vec<u8>, n: u64) -> Result<(), Refusal> {
    let end = body.len() + n as usize;
    let mut chunk = [0u8; 64 << 10];
    while body.len() < end {
        let want = chunk.len().min(end - body.len());
        match input.read(&mut chunk[..want]) {
            Ok(0) => {
                return Err(refusal(
                    400,
                    format!(
                        "the request body ended after {} of its {n} bytes",
                        n as usize - (end - body.len())
                    ),
                ));
            }
            Ok(k) => body.extend_from_slice(&chunk[..k]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                return Err(refusal(408, "the request body did not arrive in time"));
            }
            Err(e) => return Err(refusal(400, format!("cannot read the request body: {e}"))),
        }
    }
    Ok(())
}

/// Reads what the client still sends for a moment before the socket closes: closing with unread
/// bytes resets the connection, and the client may lose the answer it has not read yet.
fn drain(input: &mut BufReader<Timed>) {
    input.get_mut().deadline = None;
    let _ = input
        .get_ref()
        .stream
        .set_read_timeout(Some(Duration::from_millis(200)));
    let mut sink = [0u8; 64 << 10];
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        match input.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// A number of only `radix` digits (no sign, no space: framing two readers must agree on).
fn digits(s: &str, radix: u32) -> Option<u64> {
    if s.is_empty() || !s.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(s, radix).ok()
}

/// RFC 9110's `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

fn write_response(
    out: &mut TcpStream,
    r: &Response,
    close: bool,
    head_only: bool,
) -> io::Result<()> {
    let mut msg = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    if let Some(allow) = r.allow {
        msg.push_str(&format!("Allow: {allow}\r\n"));
    }
    if close {
        msg.push_str("Connection: close\r\n");
    }
    msg.push_str("\r\n");
    let mut bytes = msg.into_bytes();
    if !head_only {
        bytes.extend_from_slice(r.body.as_bytes());
    }
    out.write_all(&bytes)?;
    out.flush()?;
    if close {
        let _ = out.shutdown(std::net::Shutdown::Write);
    }
    Ok(())
}
