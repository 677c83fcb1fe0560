//! Serving an axum router on a TCP listener (TLS or plain HTTP) with the limits every
//! listener of Plinth has, so that a client that opens connections and sends nothing, or
//! sends slowly, cannot exhaust the process's file descriptors or fill its log:
//!
//! * at most [`ListenerLimits::max_connections`] connections at once; when that many are
//!   open the listener stops accepting (new connections wait in the kernel's backlog of
//!   [`ListenerLimits::backlog`], see [`bind`]) until one closes — back-pressure, never a
//!   dropped listener;
//! * a TLS handshake must finish within [`ListenerLimits::handshake_timeout`], and the
//!   first request must begin within the same time after it;
//! * HTTP/1 request headers must arrive within [`ListenerLimits::header_read_timeout`],
//!   and a request body that sends nothing for [`ListenerLimits::body_read_timeout`] fails
//!   (the handler sees a body error and answers 4xx);
//! * a connection with no request in flight for [`ListenerLimits::idle_timeout`] is
//!   closed (HTTP/2 with a GOAWAY). A request is in flight until its response body has
//!   been sent, so watches, followed logs and server-sent events are never idle;
//! * HTTP/2 connections are pinged every [`ListenerLimits::http2_keepalive_interval`] and
//!   closed when a ping is not answered within [`ListenerLimits::http2_keepalive_timeout`];
//!   at most [`ListenerLimits::http2_max_concurrent_streams`] streams per connection;
//! * an accept error (e.g. EMFILE, out of file descriptors) is retried after a delay
//!   that doubles from [`ListenerLimits::accept_backoff_min`] to
//!   [`ListenerLimits::accept_backoff_max`], and repeated errors are logged at most once
//!   per [`ListenerLimits::error_log_interval`] with the number left out.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use hyper::body::{Frame, SizeHint};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tower::ServiceExt;

/// Limits of one listener. The defaults follow kube-apiserver's HTTP server where it has
/// one (header timeout 32 s, idle timeout 90 s, 250 HTTP/2 streams) and Go's net/http
/// accept loop (backoff 5 ms doubling to 1 s; here from 10 ms).
#[derive(Clone, Debug)]
pub struct ListenerLimits {
    /// Connections open at once. Default 1024, and never more than half the process's
    /// open-file limit (`ulimit -n`) at start, so connections alone cannot use up the
    /// descriptors the store, the Git writers and the runner need.
    pub max_connections: usize,
    /// Connections the kernel queues for [`bind`]'s listener while none is accepted (the
    /// system may lower it to `net.core.somaxconn`). Default 1024.
    pub backlog: u32,
    /// Time for the TLS handshake, and then again for the first request to begin.
    /// Default 10 s.
    pub handshake_timeout: Duration,
    /// Time for an HTTP/1 request's headers to arrive (also how long an HTTP/1
    /// connection may wait for its next request). Default 32 s.
    pub header_read_timeout: Duration,
    /// A request body that delivers no data for this long fails. Default 32 s.
    pub body_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed. Default 90 s.
    pub idle_timeout: Duration,
    /// Interval of HTTP/2 keep-alive pings. Default 30 s.
    pub http2_keepalive_interval: Duration,
    /// An HTTP/2 connection whose ping is not answered within this is closed. Default 20 s.
    pub http2_keepalive_timeout: Duration,
    /// Concurrent streams per HTTP/2 connection. Default 250.
    pub http2_max_concurrent_streams: u32,
    /// First delay after an accept error. Default 10 ms.
    pub accept_backoff_min: Duration,
    /// Longest delay after repeated accept errors. Default 1 s.
    pub accept_backoff_max: Duration,
    /// At most one log line per this interval for repeated accept errors (and for
    /// reaching the connection cap). Default 10 s.
    pub error_log_interval: Duration,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        ListenerLimits {
            max_connections: 1024,
            backlog: 1024,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(32),
            body_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(20),
            http2_max_concurrent_streams: 250,
            accept_backoff_min: Duration::from_millis(10),
            accept_backoff_max: Duration::from_secs(1),
            error_log_interval: Duration::from_secs(10),
        }
    }
}

/// Binds a listener on `addr` with a queue of `backlog` pending connections (the standard
/// library's 128 is soon full while [`serve`] holds back at its connection cap).
///
/// # Errors
/// The address cannot be bound.
pub fn bind(addr: SocketAddr, backlog: u32) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// The soft open-file limit of this process, from `/proc/self/limits` (Linux); `None`
/// when it cannot be read or is unlimited.
fn open_file_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl ListenerLimits {
    /// `max_connections`, lowered to half of `fd_limit` when that is smaller (at least 1).
    fn connection_cap(&self, fd_limit: Option<usize>) -> usize {
        let cap = fd_limit.map_or(self.max_connections, |l| self.max_connections.min(l / 2));
        cap.max(1)
    }
}

/// Delays between attempts after accept errors: `min`, doubling up to `max`; reset by a
/// successful accept.
#[derive(Debug)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Backoff {
        Backoff {
            min,
            max,
            next: min,
        }
    }

    /// The delay before the next attempt.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }

    pub(crate) fn reset(&mut self) {
        self.next = self.min;
    }
}

/// One log line per interval for a repeated condition, carrying how many occurrences
/// were left out since the last line.
#[derive(Debug)]
pub(crate) struct RateLimitedLog {
    interval: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimitedLog {
    pub(crate) fn new(interval: Duration) -> RateLimitedLog {
        RateLimitedLog {
            interval,
            last: None,
            suppressed: 0,
        }
    }

    /// Records one occurrence at `now`: `Some(left out since the last line)` when a line
    /// should be written, `None` when this occurrence is only counted.
    pub(crate) fn occurrence(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.duration_since(last) < self.interval => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// Accept errors that belong to one connection (it went away before it was accepted):
/// retried at once, as each stands for a connection already gone.
fn per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted)
}

/// Calls `accept` until it succeeds, sleeping with `backoff` after each error and logging
/// errors through `log` (`what` names the listener).
pub(crate) async fn accept_with_backoff<T, F, Fut>(
    accept: &mut F,
    backoff: &mut Backoff,
    log: &mut RateLimitedLog,
    what: &str,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::io::Result<T>>,
{
    loop {
        match accept().await {
            Ok(t) => {
                backoff.reset();
                return t;
            }
            Err(e) if per_connection(&e) => continue,
            Err(e) => {
                let delay = backoff.next_delay();
                if let Some(left_out) = log.occurrence(Instant::now()) {
                    tracing::warn!(
                        listener = what,
                        "accepting a connection failed: {e}; retrying in {delay:?} \
                         ({left_out} more accept errors since the last report)"
                    );
                }
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Serves `router` on `listener` until the task is dropped, over TLS when `tls` is given
/// (HTTP/1.1 and HTTP/2 by ALPN), else plain HTTP. `what` names the listener in logs.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: axum::Router,
    limits: ListenerLimits,
    what: &'static str,
) {
    let cap = limits.connection_cap(open_file_limit());
    let permits = Arc::new(Semaphore::new(cap));
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let limits = Arc::new(limits);
    let mut backoff = Backoff::new(limits.accept_backoff_min, limits.accept_backoff_max);
    let mut errors = RateLimitedLog::new(limits.error_log_interval);
    let mut full = RateLimitedLog::new(limits.error_log_interval);
    let mut accept = || listener.accept();
    loop {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if let Some(left_out) = full.occurrence(Instant::now()) {
                    tracing::warn!(
                        listener = what,
                        "{cap} connections are open, the most this listener accepts; new \
                         connections wait until one closes ({left_out} more times since \
                         the last report)"
                    );
                }
                permits
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed")
            }
        };
        let (stream, peer): (tokio::net::TcpStream, SocketAddr) =
            accept_with_backoff(&mut accept, &mut backoff, &mut errors, what).await;
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let router = router.clone();
        let limits = limits.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match acceptor {
                Some(acceptor) => {
                    match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(stream))
                        .await
                    {
                        Ok(Ok(tls)) => {
                            serve_connection(hyper_util::rt::TokioIo::new(tls), router, &limits)
                                .await
                        }
                        // A failed or slow handshake is the client's problem: no log line,
                        // so a flood of them cannot fill the log.
                        Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
                None => {
                    serve_connection(hyper_util::rt::TokioIo::new(stream), router, &limits).await
                }
            }
        });
    }
}

/// What one connection has done: requests in flight (from the request's arrival until
/// its response body has been sent or dropped) and requests begun in all.
#[derive(Clone, Copy, Debug, Default)]
struct Requests {
    in_flight: usize,
    begun: u64,
}

/// Counts the requests of one connection.
#[derive(Clone)]
struct Activity(Arc<watch::Sender<Requests>>);

/// One request in flight; dropping it ends the request.
struct InFlight(Arc<watch::Sender<Requests>>);

impl Activity {
    fn new() -> (Activity, watch::Receiver<Requests>) {
        let (tx, rx) = watch::channel(Requests::default());
        (Activity(Arc::new(tx)), rx)
    }

    fn begin(&self) -> InFlight {
        self.0.send_modify(|r| {
            r.in_flight += 1;
            r.begun += 1;
        });
        InFlight(self.0.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0
            .send_modify(|r| r.in_flight = r.in_flight.saturating_sub(1));
    }
}

/// Returns once no request has been in flight for `first` (before any request began) or
/// `idle` (after one): the connection is idle and may be closed.
async fn idle(mut rx: watch::Receiver<Requests>, first: Duration, idle: Duration) {
    loop {
        // A request may have begun and ended before this first looks.
        let now = *rx.borrow_and_update();
        if now.in_flight > 0 {
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
            continue;
        }
        let wait = if now.begun == 0 { first } else { idle };
        match tokio::time::timeout(wait, rx.changed()).await {
            Err(_) => return,
            Ok(Err(_)) => return std::future::pending().await,
            Ok(Ok(())) => {}
        }
    }
}

/// A response body that keeps its request in flight until it has been sent or dropped.
/// The request ends with the body's last frame: hyper may keep a finished body a while.
struct Tracked {
    inner: Body,
    in_flight: Option<InFlight>,
}

impl hyper::body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            Poll::Pending => false,
        };
        if ended {
            self.in_flight = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body that fails when no data arrives for `timeout`, so a client that stops
/// sending mid-body cannot hold its request (and connection) open.
struct Stalling {
    inner: hyper::body::Incoming,
    timeout: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl Stalling {
    fn new(inner: hyper::body::Incoming, timeout: Duration) -> Stalling {
        Stalling {
            inner,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }
    }
}

impl hyper::body::Body for Stalling {
    type Data = bytes::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = Instant::now() + self.timeout;
                self.deadline.as_mut().reset(next);
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(format!(
                    "the request body sent nothing for {:?}",
                    self.timeout
                )
                .into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Serves HTTP/1.1 or HTTP/2 on one connection with the timeouts of `limits`.
async fn serve_connection<I>(io: I, router: axum::Router, limits: &ListenerLimits)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (activity, rx) = Activity::new();
    let body_timeout = limits.body_read_timeout;
    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let in_flight = activity.begin();
        let router = router.clone();
        let req = req.map(|b| Body::new(Stalling::new(b, body_timeout)));
        async move {
            let resp = match router.oneshot(req).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(resp.map(|inner| {
                Body::new(Tracked {
                    inner,
                    in_flight: Some(in_flight),
                })
            }))
        }
    });
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive_interval(limits.http2_keepalive_interval)
        .keep_alive_timeout(limits.http2_keepalive_timeout)
        .max_concurrent_streams(limits.http2_max_concurrent_streams);
    let conn = builder.serve_connection_with_upgrades(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = idle(rx, limits.handshake_timeout, limits.idle_timeout) => {}
    }
    conn.as_mut().graceful_shutdown();
    // Nothing is in flight: the close is quick, but a peer that stops reading must not
    // keep the connection (and its permit) for ever.
    let _ = tokio::time::timeout(limits.header_read_timeout, conn).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_maximum_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
        let delays: Vec<u64> = (0..9).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(delays, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(10));
    }

    #[test]
    fn repeated_errors_give_one_line_per_interval_with_the_count_left_out() {
        let mut log = RateLimitedLog::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let mut lines = Vec::new();
        // 1,000 errors over 25 s.
        for i in 0..1000u64 {
            if let Some(left_out) = log.occurrence(t0 + Duration::from_millis(i * 25)) {
                lines.push(left_out);
            }
        }
        assert_eq!(lines, [0, 399, 399]);
    }

    #[test]
    fn the_connection_cap_leaves_half_the_descriptors_to_the_rest() {
        let limits = ListenerLimits::default();
        assert_eq!(limits.connection_cap(None), 1024);
        assert_eq!(limits.connection_cap(Some(300)), 150);
        assert_eq!(limits.connection_cap(Some(1_048_576)), 1024);
        assert_eq!(limits.connection_cap(Some(1)), 1);
    }

    #[tokio::test]
    async fn accept_errors_back_off_instead_of_spinning() {
        // An accept that fails with EMFILE for 500 ms, then succeeds; delays from 1 ms
        // doubling to 20 ms.
        let started = Instant::now();
        let mut attempts = 0u32;
        let mut accept = || {
            attempts += 1;
            let failing = started.elapsed() < Duration::from_millis(500);
            async move {
                if failing {
                    Err(std::io::Error::from_raw_os_error(24))
                } else {
                    Ok(())
                }
            }
        };
        let mut backoff = Backoff::new(Duration::from_millis(1), Duration::from_millis(20));
        let mut log = RateLimitedLog::new(Duration::from_secs(10));
        accept_with_backoff(&mut accept, &mut backoff, &mut log, "test").await;
        // 1+2+…+16 ms, then one every 20 ms: about 30 attempts, not millions.
        assert!(attempts <= 35, "{attempts} attempts in 500 ms");
        assert!(
            attempts >= 5,
            "{attempts} attempts: the errors were not retried"
        );
        // The error count since the only line written is kept for the next one.
        assert_eq!(log.suppressed, u64::from(attempts) - 2);
    }

    /// Serves a router that answers `GET /` and echoes the length of a `POST /` body on
    /// plain HTTP on loopback with `limits`.
    async fn plain_server(limits: ListenerLimits) -> SocketAddr {
        let router = axum::Router::new().route(
            "/",
            axum::routing::get(|| async { "ok" })
                .post(|body: bytes::Bytes| async move { body.len().to_string() }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, None, router, limits, "test"));
        addr
    }

    /// Sends `request` on a new connection to a [`plain_server`] with `limits` and reads
    /// until the server closes it (or 10 s pass): what it answered, and after how long.
    async fn exchange(limits: ListenerLimits, request: &[u8]) -> (String, Duration) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = plain_server(limits).await;
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(request).await.unwrap();
        let t = Instant::now();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
        (String::from_utf8_lossy(&out).into_owned(), t.elapsed())
    }

    #[tokio::test]
    async fn a_keep_alive_connection_is_closed_after_the_idle_timeout() {
        let limits = ListenerLimits {
            idle_timeout: Duration::from_millis(500),
            ..ListenerLimits::default()
        };
        let (got, took) = exchange(limits, b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await;
        assert!(
            got.starts_with("HTTP/1.1 200") && got.ends_with("ok"),
            "{got}"
        );
        assert!(
            took >= Duration::from_millis(500) && took < Duration::from_secs(5),
            "{took:?}"
        );
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_is_closed_after_the_handshake_timeout() {
        let limits = ListenerLimits {
            handshake_timeout: Duration::from_millis(300),
            ..ListenerLimits::default()
        };
        let (got, took) = exchange(limits, b"").await;
        assert_eq!(got, "");
        assert!(took < Duration::from_secs(5), "closed after {took:?}");
    }

    #[tokio::test]
    async fn a_body_that_stops_arriving_fails_the_request() {
        let limits = ListenerLimits {
            body_read_timeout: Duration::from_millis(300),
            ..ListenerLimits::default()
        };
        let stalled = b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nabc";
        let (got, took) = exchange(limits.clone(), stalled).await;
        assert!(got.starts_with("HTTP/1.1 4"), "{got}");
        assert!(took < Duration::from_secs(5), "answered after {took:?}");
        // A body that arrives whole is read.
        let whole =
            b"POST / HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 3\r\n\r\nabc";
        let (got, _) = exchange(limits, whole).await;
        assert!(
            got.starts_with("HTTP/1.1 200") && got.ends_with('3'),
            "{got}"
        );
    }

    #[tokio::test]
    async fn a_connection_is_idle_only_with_nothing_in_flight() {
        let (activity, rx) = Activity::new();
        let first = Duration::from_millis(100);
        let idle_after = Duration::from_millis(300);
        // Nothing ever starts: idle after the first-request time.
        let t = Instant::now();
        idle(rx.clone(), first, idle_after).await;
        assert!(
            t.elapsed() >= first && t.elapsed() < idle_after,
            "{:?}",
            t.elapsed()
        );
        // A request that began and ended before anyone looked counts: idle after
        // `idle_after`, not after the (here long) first-request time.
        drop(activity.begin());
        let t = Instant::now();
        idle(rx.clone(), Duration::from_secs(60), idle_after).await;
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        // A request in flight for 1 s (a watch) keeps it busy; idle 300 ms after it ends.
        let t = Instant::now();
        let in_flight = activity.begin();
        let waiter = tokio::spawn(idle(rx, first, idle_after));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiter.is_finished(), "idle while a request was in flight");
        drop(in_flight);
        waiter.await.unwrap();
        assert!(
            t.elapsed() >= Duration::from_millis(1300),
            "{:?}",
            t.elapsed()
        );
    }
}
