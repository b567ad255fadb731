//! What the store's librdkafka clients share: a context that routes librdkafka's logs and errors into
//! `tracing` with secrets cut out and remembers the last error (so a timeout can say why), a small
//! blocking executor for the admin client's futures, and the mapping of librdkafka errors to ours.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryResult, ProducerContext};

use super::config::Secrets;
use crate::Error;

/// The context of every client of one store.
pub(crate) struct Ctx {
    secrets: Arc<Secrets>,
    /// Which client (`reader`, `admin`, `writer <name>`), for log lines.
    role: String,
    last_error: Mutex<Option<String>>,
    /// The last error warned about and when: librdkafka reports some (all brokers down) on every
    /// reconnect attempt, and a repeat within [`REPEAT_QUIET`] goes to debug.
    last_warned: Mutex<Option<(String, Instant)>>,
    auth_failed: AtomicBool,
    /// Delivery reports a producer waits for (see [`Deliveries`]).
    pub(crate) deliveries: Deliveries,
}

/// How long the same librdkafka error is warned about once (an unreachable broker is reported
/// hundreds of times a second).
const REPEAT_QUIET: Duration = Duration::from_secs(30);

/// The failed deliveries of a producer (its records' reports are failures only, see
/// `delivery.report.only.error`): a writer compares the count before and after a batch.
#[derive(Default)]
pub(crate) struct Deliveries {
    done: Mutex<Delivered>,
}

/// Failures reported so far.
#[derive(Default, Clone)]
pub(crate) struct Delivered {
    pub failures: u64,
    /// The first failure since the store opened (secrets removed).
    pub first_failure: Option<String>,
}

impl Deliveries {
    fn failed(&self, failure: String) {
        let mut d = self.done.lock().unwrap_or_else(|p| p.into_inner());
        d.failures += 1;
        d.first_failure.get_or_insert(failure);
    }

    pub(crate) fn now(&self) -> Delivered {
        self.done.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Drops a librdkafka client on a helper thread: its threads notice the stop only every 100 ms,
/// which would otherwise add up to 100 ms to whatever made and dropped it (an open).
pub(crate) fn drop_in_background<T: Send + 'static>(name: &str, client: T) {
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || drop(client));
    // Without a thread, it is dropped here (the closure, and the client with it, came back).
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "dropping a Kafka client inline");
    }
}

impl Ctx {
    pub(crate) fn new(secrets: Arc<Secrets>, role: impl Into<String>) -> Self {
        Ctx {
            secrets,
            role: role.into(),
            last_error: Mutex::new(None),
            last_warned: Mutex::new(None),
            auth_failed: AtomicBool::new(false),
            deliveries: Deliveries::default(),
        }
    }

    /// The last error librdkafka reported on this client (secrets removed).
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// The authentication error, when the brokers refused our credentials.
    pub(crate) fn auth_error(&self) -> Option<String> {
        if self.auth_failed.load(Ordering::SeqCst) {
            self.last_error()
        } else {
            None
        }
    }

    /// ` (last error: …)` or nothing.
    pub(crate) fn last_error_suffix(&self) -> String {
        self.last_error()
            .map(|e| format!(" (last error from librdkafka: {e})"))
            .unwrap_or_default()
    }

    pub(crate) fn scrub(&self, text: &str) -> String {
        self.secrets.scrub(text)
    }

    /// True if `text` was warned about within [`REPEAT_QUIET`]; else notes it as warned now.
    fn warned_lately(&self, text: &str) -> bool {
        let Ok(mut last) = self.last_warned.lock() else {
            return false;
        };
        let now = Instant::now();
        if let Some((t, at)) = last.as_ref()
            && t == text
            && now.duration_since(*at) < REPEAT_QUIET
        {
            return true;
        }
        *last = Some((text.to_string(), now));
        false
    }

    /// Notes an error seen outside the callbacks (a consumer poll error, say).
    pub(crate) fn note_error(&self, error: &KafkaError) {
        let text = self.scrub(&error.to_string());
        if is_auth(error) {
            self.auth_failed.store(true, Ordering::SeqCst);
        }
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(text);
        }
    }
}

/// True for errors that mean the brokers refused our credentials.
pub(crate) fn is_auth(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::Authentication
                | RDKafkaErrorCode::SaslAuthenticationFailed
                | RDKafkaErrorCode::IllegalSASLState
        )
    )
}

/// How loud a line of librdkafka's log is. librdkafka retries transient failures by itself (a
/// coordinator still loading, a broker connection refused or dropped): those lines are debug, not
/// news for the operator. If the failure lasts, the operation times out naming librdkafka's last
/// error, which the context keeps whatever the level.
pub(crate) fn log_line_level(level: RDKafkaLogLevel, fac: &str, msg: &str) -> tracing::Level {
    use tracing::Level;
    match level {
        // librdkafka warns once per client about each property that only the other client type
        // uses; every property goes to all three clients, so that is expected.
        _ if fac == "CONFWARN" => Level::DEBUG,
        // A broker connection failed; librdkafka reconnects. Every such line of level error or
        // worse also comes to `error` with its code, which decides there (an SSL or SASL failure
        // stays visible, a refused or dropped connection does not).
        _ if fac == "FAIL" => Level::DEBUG,
        // librdkafka's own retry, e.g. GETPID "Failed to acquire transactional PID from broker
        // TxnCoordinator/1: Broker: Coordinator load in progress: retrying" (its fatal errors take
        // another path and never say "retrying").
        _ if msg.trim_end().ends_with(": retrying") => Level::DEBUG,
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => Level::ERROR,
        RDKafkaLogLevel::Warning => Level::WARN,
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => Level::INFO,
        RDKafkaLogLevel::Debug => Level::DEBUG,
    }
}

/// How loud an error librdkafka reports through the context is: debug when it is transient and
/// librdkafka retries by itself, else warn.
pub(crate) fn error_level(error: &KafkaError) -> tracing::Level {
    let transient = match error {
        KafkaError::Transaction(rde) => rde.is_retriable() && !rde.is_fatal(),
        e => e.rdkafka_error_code().is_some_and(is_transient_code),
    };
    if transient {
        tracing::Level::DEBUG
    } else {
        tracing::Level::WARN
    }
}

/// Codes of failures that pass by themselves and that librdkafka retries: Kafka's retriable
/// coordinator, leadership and replication errors, and a broker connection that failed or timed
/// out. Not `AllBrokersDown` (no broker reachable at all is what the operator must see while a
/// command waits), nor authentication, SSL, name resolution or unknown topics (a configuration
/// that needs fixing).
pub(crate) fn is_transient_code(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::BrokerTransportFailure
            | RDKafkaErrorCode::OperationTimedOut
            | RDKafkaErrorCode::WaitingForCoordinator
            | RDKafkaErrorCode::NotCoordinator
            | RDKafkaErrorCode::CoordinatorNotAvailable
            | RDKafkaErrorCode::CoordinatorLoadInProgress
            | RDKafkaErrorCode::NotLeaderForPartition
            | RDKafkaErrorCode::LeaderNotAvailable
            | RDKafkaErrorCode::PreferredLeaderNotAvailable
            | RDKafkaErrorCode::UnknownLeaderEpoch
            | RDKafkaErrorCode::FencedLeaderEpoch
            | RDKafkaErrorCode::RequestTimedOut
            | RDKafkaErrorCode::NetworkException
            | RDKafkaErrorCode::NotEnoughReplicas
            | RDKafkaErrorCode::NotEnoughReplicasAfterAppend
            | RDKafkaErrorCode::KafkaStorageError
            | RDKafkaErrorCode::ConcurrentTransactions
            | RDKafkaErrorCode::OffsetNotAvailable
    )
}

/// One librdkafka line into `tracing` at `level` (the macros take the level as a constant).
fn emit(level: tracing::Level, role: &str, fac: &str, msg: &str) {
    use tracing::Level;
    match level {
        Level::ERROR => tracing::error!(target: "librdkafka", role, fac, "{msg}"),
        Level::WARN => tracing::warn!(target: "librdkafka", role, fac, "{msg}"),
        Level::INFO => tracing::info!(target: "librdkafka", role, fac, "{msg}"),
        Level::DEBUG => tracing::debug!(target: "librdkafka", role, fac, "{msg}"),
        _ => tracing::trace!(target: "librdkafka", role, fac, "{msg}"),
    }
}

impl ClientContext for Ctx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        let msg = self.scrub(log_message);
        emit(log_line_level(level, fac, &msg), &self.role, fac, &msg);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let text = self.scrub(&format!("{error}: {reason}"));
        if is_auth(&error) {
            self.auth_failed.store(true, Ordering::SeqCst);
        }
        if error_level(&error) == tracing::Level::DEBUG || self.warned_lately(&text) {
            tracing::debug!(target: "librdkafka", role = %self.role, "{text}");
        } else {
            tracing::warn!(target: "librdkafka", role = %self.role, "{text}");
        }
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(text);
        }
    }
}

impl ConsumerContext for Ctx {}

impl ProducerContext for Ctx {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        // Every producer gets failures only (`delivery.report.only.error`): the transactional ones'
        // commit fails for them too, this keeps the reason. Records purged by an abort report
        // themselves too; that is not news.
        if let Err((e, _)) = result {
            if !matches!(
                e.rdkafka_error_code(),
                Some(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight)
            ) {
                self.note_error(e);
            }
            self.deliveries.failed(self.scrub(&e.to_string()));
        }
    }
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `fut` on this thread until it completes or `timeout` passes (`None`). The admin client's
/// futures are completed by its own polling thread, so parking until woken is all an executor has to
/// do; kept over `pollster` or `futures-executor`, whose `block_on` cannot give up at a deadline.
pub(crate) fn block_on<F: Future>(fut: F, timeout: Duration) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let deadline = Instant::now() + timeout;
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout(deadline - now);
    }
}

/// A store error about `what`, with librdkafka's error (secrets removed).
pub(crate) fn kafka_error(ctx: &Ctx, what: &str, e: &KafkaError) -> Error {
    Error::store_caused("kafka", what, Scrubbed::of(ctx, e))
}

/// librdkafka's error with secrets removed from its text and from every cause under it, so that it
/// can travel as an error's source.
#[derive(Debug)]
pub(crate) struct Scrubbed {
    text: String,
    source: Option<Box<Scrubbed>>,
}

impl Scrubbed {
    pub(crate) fn of(ctx: &Ctx, e: &(dyn std::error::Error + 'static)) -> Scrubbed {
        Scrubbed {
            text: ctx.scrub(&e.to_string()),
            source: e.source().map(|s| Box::new(Scrubbed::of(ctx, s))),
        }
    }
}

impl std::fmt::Display for Scrubbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Scrubbed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|s| s as _)
    }
}

/// A timeout about `op`, naming the last error librdkafka reported.
pub(crate) fn timeout_error(ctx: &Ctx, op: String, timeout: Duration) -> Error {
    Error::Timeout {
        op: format!("{op}{}", ctx.last_error_suffix()),
        after: timeout,
    }
}

/// An authentication failure, reported at once instead of waiting for the timeout.
pub(crate) fn auth_error(bootstrap: &str, reason: &str) -> Error {
    Error::store(
        "kafka",
        format!(
            "authentication failed at {bootstrap}: {reason} (check sasl.mechanism, sasl.username \
             and sasl.password)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn the_same_error_is_warned_about_once_in_a_while() {
        let ctx = Ctx::new(Arc::new(Secrets::default()), "reader");
        assert!(!ctx.warned_lately("all brokers down"));
        assert!(ctx.warned_lately("all brokers down"), "a repeat is quiet");
        assert!(!ctx.warned_lately("auth failed"), "another error is news");
        assert!(
            !ctx.warned_lately("all brokers down"),
            "and so is the first again after it"
        );
    }

    #[test]
    fn a_kafka_error_keeps_its_cause_without_secrets() {
        let url = crate::store::StoreUrl::parse("kafka://h:9092/t?sasl.password=hunter2").unwrap();
        let settings = super::super::config::KafkaStoreBuilder::from_url(&url)
            .unwrap()
            .settings()
            .unwrap();
        let ctx = Ctx::new(Arc::clone(&settings.secrets), "producer");
        let cause = KafkaError::ClientCreation("sasl.password=hunter2 refused".into());
        let e = kafka_error(&ctx, "create producer", &cause);
        let source = std::error::Error::source(&e).expect("the cause travels as the source");
        assert_eq!(
            source.to_string(),
            "Client creation error: sasl.password=**** refused"
        );
        assert_eq!(
            e.to_string(),
            "kafka store: create producer: Client creation error: sasl.password=**** refused"
        );
        assert!(!format!("{e:?}").contains("hunter2"), "{e:?}");
    }

    #[test]
    fn transient_librdkafka_lines_go_to_debug() {
        let warn = RDKafkaLogLevel::Warning;
        let err = RDKafkaLogLevel::Error;
        for (level, fac, msg, want) in [
            // What a first transactional `set` on a fresh broker printed.
            (
                warn,
                "GETPID",
                "[thrd:main]: Failed to acquire transactional PID from broker TxnCoordinator/1: \
                 Broker: Coordinator load in progress: retrying",
                Level::DEBUG,
            ),
            (
                warn,
                "GETPID",
                "Failed to acquire transactional PID from broker 127.0.0.1:9092/1: Broker: Not \
                 coordinator: retrying",
                Level::DEBUG,
            ),
            (
                err,
                "FAIL",
                "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused \
                 (after 0ms in state CONNECT)",
                Level::DEBUG,
            ),
            (
                warn,
                "CONFWARN",
                "Configuration property x is a consumer property",
                Level::DEBUG,
            ),
            // Not retried: stays visible.
            (
                warn,
                "GETPID",
                "Acquired invalid PID{-1,-1}: ignoring",
                Level::WARN,
            ),
            (
                warn,
                "REQTMOUT",
                "Timed out 3 in-flight, 0 retry-queued requests",
                Level::WARN,
            ),
            (
                err,
                "TXNERR",
                "Current transaction failed in state InTransaction",
                Level::ERROR,
            ),
            (
                RDKafkaLogLevel::Critical,
                "FATAL",
                "Fatal error: fenced",
                Level::ERROR,
            ),
            (RDKafkaLogLevel::Info, "TXN", "retrying soon", Level::INFO),
        ] {
            assert_eq!(log_line_level(level, fac, msg), want, "{fac} {msg}");
        }
    }

    #[test]
    fn transient_librdkafka_errors_go_to_debug() {
        use RDKafkaErrorCode as C;
        for code in [
            C::BrokerTransportFailure,
            C::NotCoordinator,
            C::CoordinatorNotAvailable,
            C::CoordinatorLoadInProgress,
            C::NotLeaderForPartition,
            C::RequestTimedOut,
        ] {
            assert_eq!(
                error_level(&KafkaError::Global(code)),
                Level::DEBUG,
                "{code:?}"
            );
        }
        for code in [
            C::AllBrokersDown,
            C::Authentication,
            C::SaslAuthenticationFailed,
            C::SSL,
            C::Resolve,
            C::UnknownTopicOrPartition,
            C::TopicAuthorizationFailed,
            C::ProducerFenced,
            C::InvalidProducerEpoch,
            C::Fatal,
        ] {
            assert_eq!(
                error_level(&KafkaError::Global(code)),
                Level::WARN,
                "{code:?}"
            );
        }
    }
}
