//! The HealthSource controller: polls a store that Destinations write HealthRecords to
//! and applies them onto the platform.
//!
//! Per reconcile of a HealthSource:
//! 1. **Due?** A poll is due when `pollInterval` (Go duration, at least 10 s, default 1 m)
//!    has passed since the last one, or when the annotation
//!    `platform.syntasso.io/poll-now` carries a value not yet handled. Otherwise the
//!    reconcile only requeues itself for the remaining time.
//! 2. **Reader.** The Secret named by the backend's `secretRef` is read and a reader opened
//!    (kept while the spec generation and Secret version stay the same). Read access is
//!    enough.
//! 3. **Poll** ([`poll`]): list with change detection, read only the objects whose
//!    ETag/blob id changed, check each, apply the good ones as HealthRecords labelled with
//!    the source, annotated with their object key and owned by the HealthSource (deleting
//!    the source deletes its records), and remove the records whose object disappeared
//!    from the store (removed at once: the store is the Destination's statement of what it
//!    checks, and a stale record would otherwise keep a request's state forever).
//! 4. **Status**: `Ready` (`Polled`, `InvalidSpec`, `SecretNotFound`, `StoreError`), the
//!    counts and the rejected keys. Written only when one of those changed, when a manual
//!    trigger was handled, or (for `lastPollTime` alone) at most once an hour — a settled
//!    source is silent.
//!
//! Errors back off: after `n` consecutive failed polls the next one waits
//! `pollInterval × 2^(n-1)`, at most an hour (never less than `pollInterval`).
//!
//! A stream source (`spec.redis`, `spec.nats`) is not polled: the reconcile starts (or
//! restarts, when the generation or the Secret changed; the Secret is re-read every
//! [`STREAM_RECHECK`]) its consumer task, see [`stream`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector;
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};
use kube::{Resource, ResourceExt};
use plinth_api::constants::health as names;
use plinth_api::{BucketStateStore, GitStateStore, HealthRecord, HealthSource, SecretRef};
use plinth_statestore::{BucketAuth, BucketConfig, BucketProvider, RecordReader, StoreConfig};

pub mod poll;
pub mod state;
pub mod stream;

use crate::context::Context;
use crate::health::clock::Clock;
use crate::statestore::StateStoreObject;
use crate::support::harness::{Harness, Start};
use poll::poll;
use state::{
    NotReady, PollOutcome, SourceCtx, SourceState, StreamTask, consumer_name, is_stream,
    poll_interval, publish_rejections, write_status,
};
use stream::stream_config;

/// Longest wait between polls after repeated errors.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// How often a stream source's Secret is checked for a change.
pub const STREAM_RECHECK: Duration = Duration::from_secs(60);

/// Runs the HealthSource controller until the process stops.
pub async fn run(ctx: Arc<Context>, clock: Arc<dyn Clock>) {
    let client = ctx.client.clone();
    let (records, writer) = reflector::store();
    let rec_stream = watcher(Api::<HealthRecord>::all(client.clone()), Default::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .for_each(|_| async {});
    tokio::spawn(rec_stream);
    // Only spec and annotation changes wake a source: its own status writes do not.
    let (sources, swriter) = reflector::store();
    let stream = watcher(Api::<HealthSource>::all(client.clone()), Default::default())
        .default_backoff()
        .reflect(swriter)
        .applied_objects()
        .predicate_filter(
            predicates::generation.combine(predicates::annotations),
            Default::default(),
        );
    let sctx = Arc::new(SourceCtx {
        ctx,
        clock,
        records,
        sources: sources.clone(),
        consumer_name: consumer_name(),
        states: Mutex::new(HashMap::new()),
        streams: Mutex::new(HashMap::new()),
    });
    Controller::for_stream(stream, sources)
        .start(Harness::new("healthsource"), reconcile, sctx)
        .await;
}

async fn reconcile(hs: Arc<HealthSource>, s: Arc<SourceCtx>) -> Result<Action, crate::Error> {
    let uid = hs.uid().unwrap_or_default();
    s.streams
        .lock()
        .expect("streams")
        .retain(|_, t| !t.handle.is_finished());
    if hs.meta().deletion_timestamp.is_some() {
        // Its records go with it (owner references).
        s.states.lock().expect("states").remove(&uid);
        s.streams.lock().expect("streams").remove(&uid);
        return Ok(Action::await_change());
    }
    if is_stream(&hs) {
        return reconcile_stream(hs, s, uid).await;
    }
    s.streams.lock().expect("streams").remove(&uid);
    let state = s
        .states
        .lock()
        .expect("states")
        .entry(uid)
        .or_default()
        .clone();
    let mut state = state.lock().await;
    let interval = match poll_interval(&hs) {
        Ok(i) => i,
        Err(e) => {
            write_status(
                &s,
                &hs,
                &state,
                Err(NotReady(names::INVALID_SPEC, e.to_string())),
                None,
            )
            .await?;
            return Ok(Action::await_change());
        }
    };
    let trigger = hs.annotations().get(names::POLL_NOW_ANNOTATION).cloned();
    let handled = hs
        .status
        .as_ref()
        .and_then(|st| st.last_handled_trigger.clone());
    let triggered = trigger.is_some() && trigger != handled;
    let wait = next_wait(&state, interval);
    if !triggered && state.last_poll.is_some_and(|t| t.elapsed() < wait) {
        return Ok(Action::requeue(
            wait - state.last_poll.expect("set").elapsed(),
        ));
    }
    let result = poll_once(&s, &hs, &mut state).await;
    state.last_poll = Some(Instant::now());
    match &result {
        Ok(_) => state.failures = 0,
        Err(_) => state.failures += 1,
    }
    let handled_now = if triggered { trigger } else { handled };
    write_status(&s, &hs, &state, result, handled_now).await?;
    Ok(Action::requeue(next_wait(&state, interval)))
}

/// Starts the consumer task of a stream source, or restarts it when the spec or the
/// Secret changed.
async fn reconcile_stream(
    hs: Arc<HealthSource>,
    s: Arc<SourceCtx>,
    uid: String,
) -> Result<Action, crate::Error> {
    let state = s
        .states
        .lock()
        .expect("states")
        .entry(uid.clone())
        .or_default()
        .clone();
    let prepared = async {
        check_one_backend(&hs)?;
        let (secret_ref, secret) = read_secret(&s, &hs).await?;
        let data = secret.as_ref().map(secret_data).unwrap_or_default();
        let (cfg, group) = stream_config(&hs, &secret_ref, &data)?;
        Ok::<_, NotReady>((cfg, group, fingerprint(&hs, secret.as_ref())))
    }
    .await;
    let (cfg, group, fingerprint) = match prepared {
        Ok(p) => p,
        Err(not_ready) => {
            s.streams.lock().expect("streams").remove(&uid);
            let st = state.lock().await;
            write_status(&s, &hs, &st, Err(not_ready), None).await?;
            return Ok(Action::requeue(STREAM_RECHECK));
        }
    };
    let mut streams = s.streams.lock().expect("streams");
    let running = streams
        .get(&uid)
        .is_some_and(|t| t.fingerprint == fingerprint && !t.handle.is_finished());
    if !running {
        let handle = tokio::spawn(stream::consume(s.clone(), (*hs).clone(), cfg, group, state));
        streams.insert(
            uid,
            StreamTask {
                fingerprint,
                handle,
            },
        );
    }
    Ok(Action::requeue(STREAM_RECHECK))
}

fn check_one_backend(hs: &HealthSource) -> Result<(), NotReady> {
    let spec = &hs.spec;
    let n = [
        spec.bucket.is_some(),
        spec.azure.is_some(),
        spec.gcs.is_some(),
        spec.git.is_some(),
        spec.redis.is_some(),
        spec.nats.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if n != 1 {
        return Err(NotReady(
            names::INVALID_SPEC,
            "exactly one of spec.bucket, spec.azure, spec.gcs, spec.git, spec.redis, spec.nats must be set".into(),
        ));
    }
    Ok(())
}

fn next_wait(state: &SourceState, interval: Duration) -> Duration {
    if state.failures == 0 {
        return interval;
    }
    let factor = 2u32.saturating_pow(state.failures.saturating_sub(1).min(16));
    interval
        .saturating_mul(factor)
        .min(MAX_BACKOFF)
        .max(interval)
}

async fn poll_once(
    s: &Arc<SourceCtx>,
    hs: &HealthSource,
    state: &mut SourceState,
) -> Result<PollOutcome, NotReady> {
    let reader = open_reader(s, hs, state).await?;
    s.records.wait_until_ready().await.ok();
    let outcome = poll(s, hs, state, reader.as_ref())
        .await
        .map_err(|e| NotReady(names::STORE_ERROR, e.to_string()))?;
    publish_rejections(s, hs, &outcome).await;
    Ok(outcome)
}

/// Opens (or reuses) the reader for the source's current spec and Secret.
async fn open_reader(
    s: &Arc<SourceCtx>,
    hs: &HealthSource,
    state: &mut SourceState,
) -> Result<Arc<dyn RecordReader>, NotReady> {
    let (secret_ref, secret) = read_secret(s, hs).await?;
    let fingerprint = fingerprint(hs, secret.as_ref());
    if let Some((fp, r)) = &state.reader
        && *fp == fingerprint
    {
        return Ok(r.clone());
    }
    let data = secret.as_ref().map(secret_data).unwrap_or_default();
    let cfg = store_config(hs, &secret_ref, &data, &s.ctx.config())?;
    let reader = plinth_statestore::open_reader(cfg)
        .await
        .map_err(|e| NotReady(names::STORE_ERROR, e.to_string()))?;
    state.reader = Some((fingerprint, reader.clone()));
    state.listing_version = None;
    Ok(reader)
}

/// What a reader or a stream consumer is built from: the source's generation and the
/// version of its Secret; another fingerprint means it is built again.
fn fingerprint(hs: &HealthSource, secret: Option<&Secret>) -> String {
    let secret_version = secret.and_then(|x| x.metadata.resource_version.as_deref());
    format!(
        "{}/{}",
        hs.metadata.generation.unwrap_or_default(),
        secret_version.unwrap_or_default()
    )
}

async fn read_secret(
    s: &SourceCtx,
    hs: &HealthSource,
) -> Result<(String, Option<Secret>), NotReady> {
    let spec = &hs.spec;
    let r: Option<&SecretRef> = spec
        .bucket
        .as_ref()
        .and_then(|b| b.secret_ref.as_ref())
        .or(spec.azure.as_ref().and_then(|a| a.secret_ref.as_ref()))
        .or(spec.gcs.as_ref().and_then(|g| g.secret_ref.as_ref()))
        .or(spec.git.as_ref().and_then(|g| g.secret_ref.as_ref()))
        .or(spec.redis.as_ref().and_then(|r| r.secret_ref.as_ref()))
        .or(spec.nats.as_ref().and_then(|n| n.secret_ref.as_ref()));
    let Some((name, ns)) = r.and_then(|r| {
        let name = r.name.clone().filter(|n| !n.is_empty())?;
        let ns = r.namespace.clone().filter(|n| !n.is_empty());
        Some((name, ns.unwrap_or_else(|| "default".into())))
    }) else {
        return Ok((String::new(), None));
    };
    let api: Api<Secret> = Api::namespaced(s.ctx.client.clone(), &ns);
    match api.get_opt(&name).await {
        Ok(Some(sec)) => Ok((format!("{ns}/{name}"), Some(sec))),
        Ok(None) => Err(NotReady(
            names::SECRET_NOT_FOUND,
            format!("Secret {name} not found in namespace {ns}"),
        )),
        Err(e) => Err(NotReady(
            names::STORE_ERROR,
            format!("reading Secret {ns}/{name}: {e}"),
        )),
    }
}

fn secret_data(secret: &Secret) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for (k, ByteString(v)) in secret.data.iter().flatten() {
        out.insert(k.clone(), String::from_utf8_lossy(v).into_owned());
    }
    for (k, v) in secret.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone());
    }
    out
}

fn join_path(a: Option<&str>, b: Option<&str>) -> String {
    [a, b]
        .into_iter()
        .flatten()
        .map(|p| p.trim_matches('/'))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

/// The reader configuration for the source's one backend.
fn store_config(
    hs: &HealthSource,
    secret: &str,
    data: &HashMap<String, String>,
    cfg: &crate::ControllerConfig,
) -> Result<StoreConfig, NotReady> {
    let spec = &hs.spec;
    check_one_backend(hs)?;
    let sdata: crate::statestore::SecretData =
        data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let invalid = |e: crate::statestore::NotReady| NotReady(names::INVALID_SPEC, e.message);
    if let Some(b) = &spec.bucket {
        let store = BucketStateStore::new(&hs.name_any(), b.clone());
        let StoreConfig::Bucket(mut c) =
            store.build_config(secret, &sdata, cfg).map_err(invalid)?
        else {
            unreachable!("a bucket store builds a bucket config")
        };
        c.path = join_path(b.path.as_deref(), spec.path.as_deref());
        return Ok(StoreConfig::Bucket(c));
    }
    if let Some(g) = &spec.git {
        let store = GitStateStore::new(&hs.name_any(), g.clone());
        let StoreConfig::Git(mut c) = store.build_config(secret, &sdata, cfg).map_err(invalid)?
        else {
            unreachable!("a git store builds a git config")
        };
        c.path = join_path(g.path.as_deref(), spec.path.as_deref());
        c.work_dir = cfg.data_dir.join("healthsources").join(hs.name_any());
        return Ok(StoreConfig::Git(c));
    }
    cloud_config(hs, secret, data)
}

fn cloud_config(
    hs: &HealthSource,
    secret: &str,
    data: &HashMap<String, String>,
) -> Result<StoreConfig, NotReady> {
    let spec = &hs.spec;
    let key = |k: &str| data.get(k).filter(|v| !v.is_empty()).cloned();
    let missing = |what: &str| {
        NotReady(
            names::INVALID_SPEC,
            format!("Secret {secret:?} has no key {what}"),
        )
    };
    let (provider, endpoint, bucket, auth) = if let Some(a) = &spec.azure {
        let auth = match (key("sasToken"), key("accountKey")) {
            (Some(token), _) => BucketAuth::AzureSas {
                account: a.account.clone(),
                token,
            },
            (None, Some(k)) => BucketAuth::AccessKey {
                id: a.account.clone(),
                secret: k,
            },
            _ => return Err(missing("\"sasToken\" or \"accountKey\"")),
        };
        let endpoint = a.endpoint.clone().unwrap_or_default();
        (BucketProvider::Azure, endpoint, a.container.clone(), auth)
    } else {
        let g = spec.gcs.as_ref().expect("one backend is set");
        let auth = BucketAuth::AccessKey {
            id: String::new(),
            secret: key("serviceAccountKey").ok_or_else(|| missing("\"serviceAccountKey\""))?,
        };
        let endpoint = g.endpoint.clone().unwrap_or_default();
        (BucketProvider::Gcs, endpoint, g.bucket_name.clone(), auth)
    };
    let mut c = BucketConfig::s3(endpoint.clone(), bucket, auth);
    c.provider = provider;
    c.insecure = endpoint.starts_with("http://");
    c.path = join_path(None, spec.path.as_deref());
    Ok(StoreConfig::Bucket(c))
}
