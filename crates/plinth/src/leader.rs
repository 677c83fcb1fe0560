//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several `plinth
//! operator` replicas exactly one runs the controllers.
//!
//! kube-runtime has no leader election, so this follows client-go's algorithm: a
//! follower judges expiry by its own clock from when it last *saw the Lease record
//! change* (no trust in another replica's clock), the leader renews every retry period
//! and steps down when it could not renew for the renew deadline (shorter than the
//! lease duration, so it stops before anyone else may start), and a leader that shuts
//! down releases the Lease (empty holder) so a follower takes over at once. Every write
//! carries the Lease's resourceVersion: two replicas can never both win.
//!
//! A Lease counts as this replica's only when it names this identity *and* is the record
//! this replica wrote last. Two replicas given the same identity therefore cannot both
//! lead: the second one waits, saying why, for the record to stop changing; and a leader
//! that finds its record renewed by someone else under its name steps down
//! ([`LeaderError::DuplicateIdentity`]).

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

/// Where the Lease is and how long its terms are.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's `holderIdentity`.
    pub identity: String,
    /// How long a Lease that is not renewed stays valid for the others.
    pub lease_duration: Duration,
    /// How long the leader keeps leading while renewals fail (shorter than the lease).
    pub renew_deadline: Duration,
    /// Pause between tries to acquire or renew.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// Terms derived from the lease duration as client-go's defaults relate (15 s / 10 s /
    /// 2 s): renew deadline two thirds of it, retry period a fifth (at least 500 ms).
    pub fn new(namespace: &str, name: &str, identity: &str, lease_duration: Duration) -> Self {
        let lease_duration = lease_duration.max(Duration::from_secs(2));
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            renew_deadline: lease_duration * 2 / 3,
            retry_period: (lease_duration / 5).max(Duration::from_millis(500)),
            lease_duration,
        }
    }

    fn lease_ref(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Why leadership could not be taken or kept.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The API refused or failed a read or write of the Lease.
    #[error("Lease {lease}: {}", plinth_api::kube_error::describe(.source))]
    Api {
        /// namespace/name of the Lease.
        lease: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Another replica holds the Lease now.
    #[error("Lease {lease}: lost to {holder}")]
    Lost {
        /// namespace/name of the Lease.
        lease: String,
        /// The new holder's identity.
        holder: String,
    },
    /// Another process renewed the Lease under this replica's identity: two operators
    /// share an identity, and neither may trust the Lease. The leader steps down.
    #[error(
        "Lease {lease}: renewed by another process as {identity:?}; every operator replica needs its own identity (--identity, the Pod name by default)"
    )]
    DuplicateIdentity {
        /// namespace/name of the Lease.
        lease: String,
        /// The shared identity.
        identity: String,
    },
    /// No renewal succeeded within the renew deadline; the leader steps down before the
    /// Lease can expire for the others.
    #[error("Lease {lease}: not renewed for {secs:.1} s (renew deadline), stepping down")]
    RenewDeadline {
        /// namespace/name of the Lease.
        lease: String,
        /// Seconds since the last successful renewal.
        secs: f64,
    },
}

/// One replica's view of the Lease.
pub struct Elector {
    api: Api<Lease>,
    cfg: LeaseConfig,
    /// The last record seen (resourceVersion) and when this replica first saw it.
    observed: Option<(String, Instant)>,
    /// The resourceVersion of the record this replica wrote last (none before its first
    /// write and after releasing).
    written: Option<String>,
    /// Whether the Lease naming this identity, written by another process, was reported.
    warned_duplicate: bool,
}

impl Elector {
    /// An elector for `cfg` using `client`.
    pub fn new(client: kube::Client, cfg: LeaseConfig) -> Self {
        Elector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            observed: None,
            written: None,
            warned_duplicate: false,
        }
    }

    /// Waits until this replica holds the Lease.
    ///
    /// # Errors
    /// Never returns on transient API errors (they are logged and retried); only a
    /// programming error in the Lease body would surface, as [`LeaderError::Api`].
    pub async fn acquire(&mut self) -> Result<(), LeaderError> {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "trying to take the leader Lease"),
            }
            tokio::time::sleep(self.cfg.retry_period).await;
        }
    }

    /// Renews the Lease every retry period while leading; returns why leadership ended.
    pub async fn hold(&mut self) -> LeaderError {
        let mut last_renew = Instant::now();
        loop {
            tokio::time::sleep(self.cfg.retry_period).await;
            let left = self
                .cfg
                .renew_deadline
                .saturating_sub(last_renew.elapsed())
                .max(Duration::from_millis(100));
            let attempt = tokio::time::timeout(left, self.renew()).await;
            match attempt {
                Ok(Ok(())) => last_renew = Instant::now(),
                Ok(Err(
                    ended @ (LeaderError::Lost { .. } | LeaderError::DuplicateIdentity { .. }),
                )) => return ended,
                Ok(Err(e)) => tracing::warn!(error = %e, "renewing the leader Lease"),
                Err(_) => {
                    tracing::warn!(lease = %self.cfg.lease_ref(), "renewing the leader Lease timed out")
                }
            }
            let since = last_renew.elapsed();
            if since >= self.cfg.renew_deadline {
                return LeaderError::RenewDeadline {
                    lease: self.cfg.lease_ref(),
                    secs: since.as_secs_f64(),
                };
            }
        }
    }

    /// Gives the Lease up (empty holder, duration 1 s) if this replica still holds it, so
    /// that a follower takes over without waiting for expiry.
    ///
    /// # Errors
    /// The Lease could not be read or written ([`LeaderError::Api`]); a conflict means
    /// someone else wrote it, and is not an error.
    pub async fn release(&mut self) -> Result<(), LeaderError> {
        let Some(mut lease) = self.get().await? else {
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(&self.cfg.identity) {
            return Ok(());
        }
        let now = MicroTime(jiff::Timestamp::now());
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..spec
        });
        let released = match self.replace(&lease).await {
            Ok(_) | Err(LeaderError::Lost { .. }) => Ok(()),
            Err(e) => Err(e),
        };
        self.written = None;
        released
    }

    /// One renewal: the Lease must still name this replica.
    async fn renew(&mut self) -> Result<(), LeaderError> {
        match self.try_acquire_or_renew().await? {
            true => Ok(()),
            false => Err(self.lost_to_current().await),
        }
    }

    async fn lost_to_current(&self) -> LeaderError {
        let holder = match self.get().await {
            Ok(Some(l)) => l.spec.and_then(|s| s.holder_identity).unwrap_or_default(),
            _ => String::new(),
        };
        LeaderError::Lost {
            lease: self.cfg.lease_ref(),
            holder,
        }
    }

    /// Takes the Lease when it is free, expired or ours; false while another holder's is
    /// valid or when another replica wrote it first.
    ///
    /// # Errors
    /// The Lease could not be read or written ([`LeaderError::Api`]).
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let now = MicroTime(jiff::Timestamp::now());
        let Some(mut lease) = self.get().await? else {
            return self.create(now).await;
        };
        let current = lease.spec.clone().unwrap_or_default();
        let holder = current.holder_identity.clone().unwrap_or_default();
        let named = holder == self.cfg.identity;
        let ours =
            named && self.written.is_some() && self.written == lease.metadata.resource_version;
        if named && !ours {
            if self.written.is_some() {
                return Err(LeaderError::DuplicateIdentity {
                    lease: self.cfg.lease_ref(),
                    identity: self.cfg.identity.clone(),
                });
            }
            // Named after this replica but not written by it: an earlier run of it that did
            // not release the Lease, or another process with the same identity. Either way
            // it is taken only once it has expired.
            if !self.warned_duplicate {
                self.warned_duplicate = true;
                tracing::warn!(lease = %self.cfg.lease_ref(), identity = %self.cfg.identity,
                    "the leader Lease names this identity but this process did not write it; waiting for it to expire (if another operator runs with the same --identity, this one never leads)");
            }
        }
        if !ours && !holder.is_empty() && !self.expired(&lease, &current) {
            return Ok(false);
        }
        let taking_over = !ours;
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.duration_secs()),
            renew_time: Some(now.clone()),
            acquire_time: if taking_over {
                Some(now)
            } else {
                current.acquire_time.clone()
            },
            lease_transitions: Some(
                current.lease_transitions.unwrap_or(0) + i32::from(taking_over),
            ),
            ..current
        });
        match self.replace(&lease).await {
            Ok(written) => {
                self.observe(&written);
                self.written = written.metadata.resource_version.clone();
                if taking_over {
                    tracing::info!(lease = %self.cfg.lease_ref(), previous = %holder, "took the leader Lease");
                }
                Ok(true)
            }
            Err(LeaderError::Lost { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether the record has stayed unchanged, by this replica's clock, for longer than
    /// the duration it states. A record seen for the first time starts the clock.
    fn expired(&mut self, lease: &Lease, spec: &LeaseSpec) -> bool {
        let seen_at = self.observe(lease);
        let stated = spec
            .lease_duration_seconds
            .map_or(self.cfg.lease_duration, |d| {
                Duration::from_secs(u64::try_from(d).unwrap_or(0))
            });
        seen_at.elapsed() >= stated
    }

    /// Records `lease` as seen; returns when its current version was first seen.
    fn observe(&mut self, lease: &Lease) -> Instant {
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        match &self.observed {
            Some((v, at)) if *v == version => *at,
            _ => {
                let at = Instant::now();
                self.observed = Some((version, at));
                at
            }
        }
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.cfg.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    async fn create(&mut self, now: MicroTime) -> Result<bool, LeaderError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.cfg.name.clone()),
                namespace: Some(self.cfg.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.cfg.identity.clone()),
                lease_duration_seconds: Some(self.duration_secs()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(written) => {
                self.observe(&written);
                self.written = written.metadata.resource_version.clone();
                tracing::info!(lease = %self.cfg.lease_ref(), "created the leader Lease");
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(source) => Err(self.api_error(source)),
        }
    }

    async fn get(&self) -> Result<Option<Lease>, LeaderError> {
        self.api
            .get_opt(&self.cfg.name)
            .await
            .map_err(|source| self.api_error(source))
    }

    /// Writes `lease` with its resourceVersion; a conflict is [`LeaderError::Lost`].
    async fn replace(&self, lease: &Lease) -> Result<Lease, LeaderError> {
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), lease)
            .await
        {
            Ok(written) => Ok(written),
            Err(kube::Error::Api(e)) if e.code == 409 => Err(LeaderError::Lost {
                lease: self.cfg.lease_ref(),
                holder: String::from("(a concurrent writer)"),
            }),
            Err(source) => Err(self.api_error(source)),
        }
    }

    fn api_error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Api {
            lease: self.cfg.lease_ref(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(identity: &str) -> LeaseConfig {
        LeaseConfig::new("default", "plinth-leader", identity, Duration::from_secs(2))
    }

    /// Two replicas with one identity: the second does not lead while the first renews,
    /// and when another process renews the Lease under the leader's name, the leader
    /// steps down saying why.
    #[tokio::test]
    async fn two_replicas_with_one_identity_never_both_lead() {
        let server = plinth_apiserver::testing::TestServer::start()
            .await
            .unwrap();
        let mut first = Elector::new(server.client(), terms("op-1"));
        first.acquire().await.unwrap();
        let mut second = Elector::new(server.client(), terms("op-1"));
        // Three lease durations of the first renewing: the second never takes it.
        let deadline = Instant::now() + Duration::from_secs(6);
        while Instant::now() < deadline {
            first.renew().await.unwrap();
            assert!(!second.try_acquire_or_renew().await.unwrap(), "both lead");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        // The second writes the record under the shared name (as a replica that took an
        // expired Lease would): the first steps down.
        let mut lease = second.get().await.unwrap().unwrap();
        lease.spec.as_mut().unwrap().renew_time = Some(MicroTime(jiff::Timestamp::now()));
        second.replace(&lease).await.unwrap();
        let ended = first.renew().await.unwrap_err();
        assert!(
            matches!(ended, LeaderError::DuplicateIdentity { .. }),
            "{ended}"
        );
        assert!(ended.to_string().contains("--identity"), "{ended}");
    }

    /// A restart under the same identity that released the Lease takes it at once; one
    /// that did not waits for the old record to expire.
    #[tokio::test]
    async fn a_restart_takes_a_released_lease_at_once_and_an_unreleased_one_after_expiry() {
        let server = plinth_apiserver::testing::TestServer::start()
            .await
            .unwrap();
        let mut old = Elector::new(server.client(), terms("op-1"));
        old.acquire().await.unwrap();
        old.release().await.unwrap();
        let mut new = Elector::new(server.client(), terms("op-1"));
        assert!(
            new.try_acquire_or_renew().await.unwrap(),
            "a released Lease is free"
        );
        drop(new); // gone without releasing
        let mut again = Elector::new(server.client(), terms("op-1"));
        assert!(
            !again.try_acquire_or_renew().await.unwrap(),
            "not before expiry"
        );
        let start = Instant::now();
        again.acquire().await.unwrap();
        assert!(
            start.elapsed() >= Duration::from_millis(1500),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn renew_deadline_is_shorter_than_the_lease() {
        for secs in [1, 2, 6, 15, 60] {
            let c = LeaseConfig::new("ns", "l", "me", Duration::from_secs(secs));
            assert!(c.renew_deadline < c.lease_duration, "{secs}");
            assert!(c.retry_period < c.renew_deadline, "{secs}");
        }
        let c = LeaseConfig::new("ns", "l", "me", Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(3));
    }
}
