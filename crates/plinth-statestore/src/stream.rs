//! Stream transports for HealthRecords: a Redis stream or a NATS JetStream stream, written
//! by the health writer ([`StreamSink`]) and read by a platform's HealthSource through a
//! consumer group shared by its replicas ([`StreamConsumer`]).
//!
//! **Messages.** One message per record write: its body is the HealthRecord document the
//! bucket and Git stores hold (YAML, stamped with the schedule and heartbeat annotations),
//! and it carries the record's store path (`<namespace>/<promise>/<request>/<definition>.yaml`)
//! as its key — Redis field `key` beside the field `record`; NATS header
//! [`KEY_HEADER`]. When a HealthDefinition is deleted the writer sends a **tombstone**: a
//! HealthRecord document with only `apiVersion`, `kind` and `metadata` (`name`,
//! `namespace`) and no `data` ([`tombstone`]).
//!
//! **Bounds.** Redis: `XADD ... MAXLEN ~ <max_len>` keeps the stream near
//! [`DEFAULT_REDIS_MAX_LEN`] entries. NATS: the stream is created (if missing) with the
//! subject and a per-subject history of [`NATS_MAX_MSGS_PER_SUBJECT`] messages.
//!
//! **Delivery** is at-least-once: a message is acknowledged only after the platform applied
//! or rejected it. Redis: `XREADGROUP` in a consumer group, `XACK`, and `XAUTOCLAIM` of
//! entries another consumer left pending for [`CLAIM_IDLE`] (a replica that died). NATS: a
//! durable pull consumer shared by the replicas, acknowledged per message; an unacknowledged
//! message is redelivered after [`CLAIM_IDLE`].

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;

use crate::StoreError;
use crate::health::{Batch, HealthSink};

/// Header of a NATS message naming the record's store path.
pub const KEY_HEADER: &str = "Plinth-Health-Key";
/// Redis stream length the writer keeps (approximately: `MAXLEN ~`).
pub const DEFAULT_REDIS_MAX_LEN: usize = 10_000;
/// Messages per subject a NATS stream created by Plinth keeps.
pub const NATS_MAX_MSGS_PER_SUBJECT: i64 = 10_000;
/// How long a delivered, unacknowledged message waits before another consumer takes it.
pub const CLAIM_IDLE: Duration = Duration::from_secs(30);
/// Prefix of the default consumer group (Redis) and durable consumer name (NATS) of a
/// HealthSource: [`default_group`].
pub const DEFAULT_GROUP: &str = "plinth";

/// The default consumer group (Redis) or durable consumer (NATS) of the HealthSource
/// `source`: `plinth-<source>` (dots as `_`, which NATS names do not take). One per
/// source, so two sources on one stream each read every message (a shared group would
/// split them), while a source's platform replicas share it.
///
/// ```
/// assert_eq!(plinth_statestore::stream::default_group("worker-1"), "plinth-worker-1");
/// assert_eq!(plinth_statestore::stream::default_group("eu.worker"), "plinth-eu_worker");
/// ```
pub fn default_group(source: &str) -> String {
    format!("{DEFAULT_GROUP}-{}", source.replace('.', "_"))
}

/// Whether the NATS subject `pattern` (`*` one token, `>` the rest) takes `subject`.
fn subject_matches(pattern: &str, subject: &str) -> bool {
    let mut p = pattern.split('.');
    let mut t = subject.split('.');
    loop {
        match (p.next(), t.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}
/// Most messages handed out by one [`StreamConsumer::next`].
pub const MAX_BATCH: usize = 100;

/// A Redis stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisConfig {
    /// `redis://host:port` (or `rediss://` for TLS).
    pub address: String,
    /// The stream's key.
    pub stream: String,
    /// ACL user.
    pub username: Option<String>,
    /// Password (with or without a user).
    pub password: Option<String>,
    /// `MAXLEN ~` of every `XADD`.
    pub max_len: usize,
}

impl RedisConfig {
    /// A stream at `address` without credentials.
    pub fn new(address: impl Into<String>, stream: impl Into<String>) -> RedisConfig {
        RedisConfig {
            address: address.into(),
            stream: stream.into(),
            username: None,
            password: None,
            max_len: DEFAULT_REDIS_MAX_LEN,
        }
    }
}

/// A NATS JetStream stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsConfig {
    /// Server URLs (`nats://host:port`, `tls://...`).
    pub servers: Vec<String>,
    /// The JetStream stream's name.
    pub stream: String,
    /// The subject records are published on.
    pub subject: String,
    /// Token authentication.
    pub token: Option<String>,
    /// User (with `password`).
    pub username: Option<String>,
    /// Password.
    pub password: Option<String>,
}

impl NatsConfig {
    /// A stream on `servers` without credentials.
    pub fn new(
        servers: Vec<String>,
        stream: impl Into<String>,
        subject: impl Into<String>,
    ) -> NatsConfig {
        NatsConfig {
            servers,
            stream: stream.into(),
            subject: subject.into(),
            token: None,
            username: None,
            password: None,
        }
    }
}

/// A stream that carries HealthRecords.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamConfig {
    /// A Redis stream.
    Redis(RedisConfig),
    /// A NATS JetStream stream.
    Nats(NatsConfig),
}

impl StreamConfig {
    /// The stream, for messages (no credentials).
    pub fn describe(&self) -> String {
        match self {
            StreamConfig::Redis(r) => format!("redis stream {} at {}", r.stream, r.address),
            StreamConfig::Nats(n) => format!(
                "NATS stream {} subject {} at {}",
                n.stream,
                n.subject,
                n.servers.join(",")
            ),
        }
    }
}

fn unreachable(target: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unreachable {
        target: target.to_string(),
        cause: e.to_string(),
    }
}

fn invalid(field: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::InvalidConfig {
        field: field.to_string(),
        cause: e.to_string(),
    }
}

async fn redis_connection(
    c: &RedisConfig,
) -> Result<redis::aio::MultiplexedConnection, StoreError> {
    use redis::IntoConnectionInfo;
    let mut info = c
        .address
        .as_str()
        .into_connection_info()
        .map_err(|e| invalid("address", e))?;
    let mut settings = info.redis_settings().clone();
    if let Some(u) = &c.username {
        settings = settings.set_username(u);
    }
    if let Some(p) = &c.password {
        settings = settings.set_password(p);
    }
    info = info.set_redis_settings(settings);
    let client = redis::Client::open(info).map_err(|e| invalid("address", e))?;
    // No response timeout: XREADGROUP BLOCK waits on purpose.
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(None);
    client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
        .map_err(|e| unreachable(&c.address, e))
}

async fn nats_jetstream(
    c: &NatsConfig,
) -> Result<(async_nats::Client, async_nats::jetstream::Context), StoreError> {
    let mut opts = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(10))
        .name("plinth-health");
    if let Some(t) = &c.token {
        opts = opts.token(t.clone());
    }
    if let (Some(u), Some(p)) = (&c.username, &c.password) {
        opts = opts.user_and_password(u.clone(), p.clone());
    }
    let target = c.servers.join(",");
    let client = opts
        .connect(c.servers.as_slice())
        .await
        .map_err(|e| unreachable(&target, e))?;
    let js = async_nats::jetstream::new(client.clone());
    Ok((client, js))
}

/// The stream of `c`, created (capturing its subject) when missing. An existing stream
/// that does not capture the subject is an error: what is published on it would be kept
/// by no stream, and lost.
async fn nats_stream(
    c: &NatsConfig,
    js: &async_nats::jetstream::Context,
) -> Result<async_nats::jetstream::stream::Stream, StoreError> {
    let mut stream = js
        .get_or_create_stream(async_nats::jetstream::stream::Config {
            name: c.stream.clone(),
            subjects: vec![c.subject.clone()],
            max_messages_per_subject: NATS_MAX_MSGS_PER_SUBJECT,
            ..Default::default()
        })
        .await
        .map_err(|e| unreachable(&c.servers.join(","), format!("stream {}: {e}", c.stream)))?;
    let subjects = stream
        .info()
        .await
        .map_err(|e| unreachable(&c.servers.join(","), format!("stream {}: {e}", c.stream)))?
        .config
        .subjects
        .clone();
    if !subjects.iter().any(|p| subject_matches(p, &c.subject)) {
        return Err(invalid(
            "subject",
            format!(
                "NATS stream {} captures {}, not {}: add the subject to the stream, or name a stream that captures it",
                c.stream,
                subjects.join(", "),
                c.subject
            ),
        ));
    }
    Ok(stream)
}

enum Conn {
    Redis(redis::aio::MultiplexedConnection),
    Nats(async_nats::jetstream::Context),
}

/// The health writer's sink on a stream: one message per record (a tombstone for a
/// deleted one), connected on first use and again after a failure.
pub struct StreamSink {
    cfg: StreamConfig,
    conn: tokio::sync::Mutex<Option<Conn>>,
}

impl StreamSink {
    /// A sink for `cfg` (connected lazily).
    pub fn new(cfg: StreamConfig) -> StreamSink {
        StreamSink {
            cfg,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    async fn connect(&self) -> Result<Conn, StoreError> {
        match &self.cfg {
            StreamConfig::Redis(r) => Ok(Conn::Redis(redis_connection(r).await?)),
            StreamConfig::Nats(n) => {
                let (_client, js) = nats_jetstream(n).await?;
                nats_stream(n, &js).await?;
                Ok(Conn::Nats(js))
            }
        }
    }

    async fn send(&self, conn: &mut Conn, key: &str, body: String) -> Result<(), StoreError> {
        let target = self.cfg.describe();
        match (conn, &self.cfg) {
            (Conn::Redis(c), StreamConfig::Redis(r)) => {
                redis::cmd("XADD")
                    .arg(&r.stream)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(r.max_len)
                    .arg("*")
                    .arg("key")
                    .arg(key)
                    .arg("record")
                    .arg(body)
                    .query_async::<String>(c)
                    .await
                    .map_err(|e| unreachable(&target, e))?;
                Ok(())
            }
            (Conn::Nats(js), StreamConfig::Nats(n)) => {
                let mut headers = async_nats::HeaderMap::new();
                headers.insert(KEY_HEADER, key);
                js.publish_with_headers(n.subject.clone(), headers, body.into())
                    .await
                    .map_err(|e| unreachable(&target, e))?
                    .await
                    .map_err(|e| unreachable(&target, e))?;
                Ok(())
            }
            _ => unreachable!("the connection matches the configuration"),
        }
    }
}

impl HealthSink for StreamSink {
    fn write(&self, batch: &Batch) -> BoxFuture<'_, Vec<Result<(), StoreError>>> {
        let messages = batch.messages();
        Box::pin(async move {
            let mut guard = self.conn.lock().await;
            if guard.is_none() {
                match self.connect().await {
                    Ok(c) => *guard = Some(c),
                    Err(e) => return messages.iter().map(|_| Err(e.clone())).collect(),
                }
            }
            let conn = guard.as_mut().expect("connected above");
            let mut out = Vec::with_capacity(messages.len());
            let mut failed = false;
            // In order: a record's messages must not overtake each other.
            for (key, body) in messages {
                let r = self.send(conn, &key, body).await;
                failed |= r.is_err();
                out.push(r);
            }
            if failed {
                *guard = None;
            }
            out
        })
    }
}

/// One message read from a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamMessage {
    /// The stream's id of the message (Redis entry id; NATS stream sequence).
    pub id: String,
    /// The record's store path the writer sent, if any.
    pub key: Option<String>,
    /// The document.
    pub body: Vec<u8>,
}

struct RedisConsumer {
    cfg: RedisConfig,
    conn: redis::aio::MultiplexedConnection,
    group: String,
    consumer: String,
    /// Read this consumer's own pending entries before new ones (after a failed handling).
    own_pending: bool,
    last_claim: Option<std::time::Instant>,
}

struct NatsConsumer {
    target: String,
    _client: async_nats::Client,
    messages: async_nats::jetstream::consumer::pull::Stream,
    unacked: HashMap<String, async_nats::jetstream::Message>,
}

enum Inner {
    Redis(Box<RedisConsumer>),
    Nats(Box<NatsConsumer>),
}

/// A member of a stream's consumer group: [`StreamConsumer::next`] hands out messages,
/// [`StreamConsumer::ack`] acknowledges the handled ones, [`StreamConsumer::retry_later`]
/// leaves them for redelivery.
pub struct StreamConsumer {
    inner: Inner,
    describe: String,
}

impl StreamConsumer {
    /// Joins consumer group `group` (created at the stream's start if missing, so records
    /// written before the platform listened are read) as `consumer` (unique per process).
    ///
    /// # Errors
    /// The stream cannot be reached or the configuration is unusable.
    pub async fn open(
        cfg: &StreamConfig,
        group: &str,
        consumer: &str,
    ) -> Result<StreamConsumer, StoreError> {
        let describe = cfg.describe();
        let inner = match cfg {
            StreamConfig::Redis(r) => {
                let mut conn = redis_connection(r).await?;
                let created: redis::RedisResult<String> = redis::cmd("XGROUP")
                    .arg("CREATE")
                    .arg(&r.stream)
                    .arg(group)
                    .arg("0")
                    .arg("MKSTREAM")
                    .query_async(&mut conn)
                    .await;
                match created {
                    Ok(_) => {}
                    Err(e) if e.code() == Some("BUSYGROUP") => {}
                    Err(e) => return Err(unreachable(&describe, e)),
                }
                Inner::Redis(Box::new(RedisConsumer {
                    cfg: r.clone(),
                    conn,
                    group: group.to_string(),
                    consumer: consumer.to_string(),
                    own_pending: true,
                    last_claim: None,
                }))
            }
            StreamConfig::Nats(n) => {
                use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
                let (client, js) = nats_jetstream(n).await?;
                let stream = nats_stream(n, &js).await?;
                let config = pull::Config {
                    durable_name: Some(group.to_string()),
                    deliver_policy: DeliverPolicy::All,
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: CLAIM_IDLE,
                    filter_subject: n.subject.clone(),
                    ..Default::default()
                };
                let failed = |e: &dyn std::fmt::Display| {
                    unreachable(&describe, format!("consumer {group}: {e}"))
                };
                let mut consumer: async_nats::jetstream::consumer::PullConsumer = stream
                    .get_or_create_consumer(group, config.clone())
                    .await
                    .map_err(|e| failed(&e))?;
                let filter = consumer
                    .info()
                    .await
                    .map_err(|e| failed(&e))?
                    .config
                    .filter_subject
                    .clone();
                if filter != n.subject {
                    // The source's subject changed, or another source named this consumer.
                    // A consumer named after this source is this source's own: made again
                    // on the new subject (from the stream's start; older records change
                    // nothing). Another name is not touched.
                    if !group.starts_with(&format!("{DEFAULT_GROUP}-")) {
                        return Err(invalid(
                            "consumer",
                            format!(
                                "NATS consumer {group} of stream {} filters subject {filter:?}, not {}: another HealthSource may use it; give this one its own consumer",
                                n.stream, n.subject
                            ),
                        ));
                    }
                    stream
                        .delete_consumer(group)
                        .await
                        .map_err(|e| failed(&e))?;
                    consumer = stream
                        .create_consumer(config)
                        .await
                        .map_err(|e| failed(&e))?;
                }
                let messages = consumer
                    .stream()
                    .max_messages_per_batch(MAX_BATCH)
                    .heartbeat(Duration::from_secs(5))
                    .expires(Duration::from_secs(30))
                    .messages()
                    .await
                    .map_err(|e| unreachable(&describe, e))?;
                Inner::Nats(Box::new(NatsConsumer {
                    target: describe.clone(),
                    _client: client,
                    messages,
                    unacked: HashMap::new(),
                }))
            }
        };
        Ok(StreamConsumer { inner, describe })
    }

    /// The stream, for messages.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// Waits at most `wait` for messages; returns at most [`MAX_BATCH`], possibly none.
    ///
    /// # Errors
    /// The stream failed (the consumer should be opened again).
    pub async fn next(&mut self, wait: Duration) -> Result<Vec<StreamMessage>, StoreError> {
        match &mut self.inner {
            Inner::Redis(r) => r.next(wait).await,
            Inner::Nats(n) => n.next(wait).await,
        }
    }

    /// Acknowledges handled messages.
    ///
    /// # Errors
    /// The stream failed.
    pub async fn ack(&mut self, ids: &[String]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        match &mut self.inner {
            Inner::Redis(r) => {
                let mut cmd = redis::cmd("XACK");
                cmd.arg(&r.cfg.stream).arg(&r.group).arg(ids);
                cmd.query_async::<i64>(&mut r.conn)
                    .await
                    .map_err(|e| unreachable(&self.describe, e))?;
                Ok(())
            }
            Inner::Nats(n) => {
                for id in ids {
                    if let Some(m) = n.unacked.remove(id) {
                        m.ack().await.map_err(|e| unreachable(&n.target, e))?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Leaves messages unacknowledged, to be handed out again (Redis: by the next
    /// [`StreamConsumer::next`]; NATS: redelivered after `delay`).
    pub async fn retry_later(&mut self, ids: &[String], delay: Duration) {
        match &mut self.inner {
            Inner::Redis(r) => r.own_pending = true,
            Inner::Nats(n) => {
                for id in ids {
                    if let Some(m) = n.unacked.remove(id) {
                        let _ = m
                            .ack_with(async_nats::jetstream::AckKind::Nak(Some(delay)))
                            .await;
                    }
                }
            }
        }
    }
}

fn redis_message(e: &redis::streams::StreamId) -> StreamMessage {
    let bytes = |k: &str| match e.map.get(k) {
        Some(redis::Value::BulkString(b)) => Some(b.clone()),
        Some(redis::Value::SimpleString(s)) => Some(s.clone().into_bytes()),
        _ => None,
    };
    StreamMessage {
        id: e.id.clone(),
        key: bytes("key").map(|b| String::from_utf8_lossy(&b).into_owned()),
        body: bytes("record").unwrap_or_default(),
    }
}

impl RedisConsumer {
    async fn next(&mut self, wait: Duration) -> Result<Vec<StreamMessage>, StoreError> {
        let target = format!("redis stream {} at {}", self.cfg.stream, self.cfg.address);
        let err = |e: redis::RedisError| unreachable(&target, e);
        if self.own_pending {
            let reply: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg(&self.group)
                .arg(&self.consumer)
                .arg("COUNT")
                .arg(MAX_BATCH)
                .arg("STREAMS")
                .arg(&self.cfg.stream)
                .arg("0")
                .query_async(&mut self.conn)
                .await
                .map_err(err)?;
            let got: Vec<StreamMessage> = reply
                .keys
                .iter()
                .flat_map(|k| k.ids.iter().map(redis_message))
                .collect();
            if !got.is_empty() {
                return Ok(got);
            }
            self.own_pending = false;
        }
        if self
            .last_claim
            .is_none_or(|t| t.elapsed() >= CLAIM_IDLE / 3)
        {
            self.last_claim = Some(std::time::Instant::now());
            let reply: redis::streams::StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
                .arg(&self.cfg.stream)
                .arg(&self.group)
                .arg(&self.consumer)
                .arg(CLAIM_IDLE.as_millis() as u64)
                .arg("0-0")
                .arg("COUNT")
                .arg(MAX_BATCH)
                .query_async(&mut self.conn)
                .await
                .map_err(err)?;
            if !reply.claimed.is_empty() {
                tracing::info!(stream = %self.cfg.stream, entries = reply.claimed.len(), "claimed health records another consumer left pending");
                return Ok(reply.claimed.iter().map(redis_message).collect());
            }
        }
        let reply: Option<redis::streams::StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&self.group)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(MAX_BATCH)
            .arg("BLOCK")
            .arg(wait.as_millis().max(1) as u64)
            .arg("STREAMS")
            .arg(&self.cfg.stream)
            .arg(">")
            .query_async(&mut self.conn)
            .await
            .map_err(err)?;
        Ok(reply
            .map(|r| {
                r.keys
                    .iter()
                    .flat_map(|k| k.ids.iter().map(redis_message))
                    .collect()
            })
            .unwrap_or_default())
    }
}

impl NatsConsumer {
    fn take(
        &mut self,
        m: Result<async_nats::jetstream::Message, impl std::fmt::Display>,
    ) -> Result<StreamMessage, StoreError> {
        let m = m.map_err(|e| unreachable(&self.target, e))?;
        let id = m
            .info()
            .map(|i| i.stream_sequence.to_string())
            .map_err(|e| unreachable(&self.target, e))?;
        let key = m
            .headers
            .as_ref()
            .and_then(|h| h.get(KEY_HEADER))
            .map(|v| v.as_str().to_string());
        let out = StreamMessage {
            id: id.clone(),
            key,
            body: m.payload.to_vec(),
        };
        self.unacked.insert(id, m);
        Ok(out)
    }

    async fn next(&mut self, wait: Duration) -> Result<Vec<StreamMessage>, StoreError> {
        let first = match tokio::time::timeout(wait, self.messages.next()).await {
            Err(_) => return Ok(Vec::new()),
            Ok(None) => return Err(unreachable(&self.target, "the consumer's stream ended")),
            Ok(Some(m)) => m,
        };
        let mut out = vec![self.take(first)?];
        while out.len() < MAX_BATCH {
            match futures::FutureExt::now_or_never(self.messages.next()) {
                Some(Some(m)) => out.push(self.take(m)?),
                Some(None) => break,
                None => break,
            }
        }
        Ok(out)
    }
}
