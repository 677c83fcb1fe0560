//! Bucket writer against moto's S3 server (and a local directory).

use crate::support;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use plinth_statestore::layout::{self, FilepathMode};
use plinth_statestore::{
    BucketAuth, BucketConfig, LocalDirConfig, StateStore, StoreConfig, StoreError, WriteOp,
    WriteRequest,
};
use support::*;

fn s3(port: u16, bucket: &str) -> BucketConfig {
    let mut c = BucketConfig::s3(
        format!("127.0.0.1:{port}"),
        bucket,
        BucketAuth::AccessKey {
            id: "AKIDTEST".into(),
            secret: "SECRETTEST".into(),
        },
    );
    c.insecure = true;
    c
}

fn replace(name: &str, dir: &str, files: &[(&str, &str)]) -> WriteRequest {
    WriteRequest {
        name: name.into(),
        ops: vec![WriteOp::ReplaceDir {
            dir: dir.into(),
            files: files
                .iter()
                .map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))
                .collect(),
        }],
    }
}

/// Writes, replaces, deletes and reads through one store; shared by the S3 and local tests.
async fn exercise(store: &StateStore) {
    store.validate().await.unwrap();
    let canary = layout::canary_files("worker-2", FilepathMode::None).unwrap();
    store
        .write(WriteRequest {
            name: layout::CANARY_WRITER_NAME.into(),
            ops: canary
                .into_iter()
                .map(|(path, content)| WriteOp::Put { path, content })
                .collect(),
        })
        .await
        .unwrap();
    let dir = "worker-1/resources/default/redis/r1/configure/5058f";
    let first = store
        .write(replace(
            "wp-1",
            dir,
            &[
                ("a.yaml", "a: 1\n"),
                ("b.yaml", "b: 1\n"),
                ("sub/c.yaml", "c\n"),
            ],
        ))
        .await
        .unwrap();
    assert!(first.changed);
    // Same content again: nothing written, same versionID.
    let again = store
        .write(replace(
            "wp-1",
            dir,
            &[
                ("a.yaml", "a: 1\n"),
                ("b.yaml", "b: 1\n"),
                ("sub/c.yaml", "c\n"),
            ],
        ))
        .await
        .unwrap();
    assert!(!again.changed);
    assert_eq!(first.version_id, again.version_id);
    // A sibling directory that shares a name prefix must survive the replace.
    store
        .write(replace(
            "wp-2",
            &format!("{dir}x"),
            &[("keep.yaml", "keep\n")],
        ))
        .await
        .unwrap();
    let replaced = store
        .write(replace("wp-1", dir, &[("a.yaml", "a: 2\n")]))
        .await
        .unwrap();
    assert!(replaced.changed);
    assert_ne!(replaced.version_id, first.version_id);
    assert_eq!(
        store.list("worker-1").await.unwrap(),
        vec![format!("{dir}/a.yaml"), format!("{dir}x/keep.yaml"),]
    );
    assert_eq!(
        store
            .read(&format!("{dir}/a.yaml"))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"a: 2\n"[..])
    );
    assert_eq!(store.read(&format!("{dir}/b.yaml")).await.unwrap(), None);
    assert_eq!(
        store
            .read("worker-2/kratix-canary-configmap.yaml")
            .await
            .unwrap()
            .as_deref(),
        Some(layout::CANARY_CONFIGMAP_YAML.as_bytes())
    );
    // none-mode state file round trip, Delete and DeleteDir.
    let state_path = layout::none_state_file_path("worker-2", "default", "wp-n").unwrap();
    let files = vec!["worker-2/x.yaml".to_string()];
    store
        .write(WriteRequest {
            name: "wp-n".into(),
            ops: vec![
                WriteOp::Put {
                    path: files[0].clone(),
                    content: b"x\n".to_vec(),
                },
                WriteOp::Put {
                    path: state_path.clone(),
                    content: layout::none_state_file_content(&files),
                },
            ],
        })
        .await
        .unwrap();
    let state = store.read(&state_path).await.unwrap().unwrap();
    assert_eq!(layout::parse_none_state_file(&state).unwrap(), files);
    let del = store
        .write(WriteRequest {
            name: "wp-n".into(),
            ops: vec![
                WriteOp::Delete {
                    path: files[0].clone(),
                },
                WriteOp::Delete {
                    path: state_path.clone(),
                },
                WriteOp::DeleteDir {
                    dir: "worker-1".into(),
                },
            ],
        })
        .await
        .unwrap();
    assert!(del.changed);
    assert!(store.list("worker-1").await.unwrap().is_empty());
    assert_eq!(
        store.list("").await.unwrap(),
        vec![
            "worker-2/kratix-canary-configmap.yaml".to_string(),
            "worker-2/kratix-canary-namespace.yaml".to_string(),
        ]
    );
    // Escaping paths are refused before anything is written.
    let err = store
        .write(WriteRequest {
            name: "wp-evil".into(),
            ops: vec![
                WriteOp::Put {
                    path: "worker-2/ok.yaml".into(),
                    content: b"ok".to_vec(),
                },
                WriteOp::Put {
                    path: "worker-2/../../escape.yaml".into(),
                    content: b"x".to_vec(),
                },
            ],
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::PathEscapes { ref path, .. } if path == "worker-2/../../escape.yaml"),
        "{err:?}"
    );
    assert_eq!(store.read("worker-2/ok.yaml").await.unwrap(), None);
}

#[tokio::test]
async fn s3_writes_only_what_changed() {
    let Some(moto) = moto() else { return };
    create_bucket(moto.port, "kratix");
    let mut c = s3(moto.port, "kratix");
    c.path = "/platform/".into();
    let store = StateStore::open(StoreConfig::Bucket(c)).await.unwrap();
    exercise(&store).await;
    // The prefix is applied: a store without prefix sees the keys under platform/.
    let raw = StateStore::open(StoreConfig::Bucket(s3(moto.port, "kratix")))
        .await
        .unwrap();
    assert_eq!(
        raw.list("").await.unwrap(),
        vec![
            "platform/worker-2/kratix-canary-configmap.yaml".to_string(),
            "platform/worker-2/kratix-canary-namespace.yaml".to_string(),
        ]
    );
}

#[tokio::test]
async fn local_directory_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = StateStore::open(StoreConfig::LocalDir(LocalDirConfig {
        root: tmp.path().join("bucket"),
        path: "platform".into(),
    }))
    .await
    .unwrap();
    exercise(&store).await;
    assert_eq!(
        std::fs::read(
            tmp.path()
                .join("bucket/platform/worker-2/kratix-canary-namespace.yaml")
        )
        .unwrap(),
        layout::CANARY_NAMESPACE_YAML.as_bytes()
    );
}

#[tokio::test]
async fn missing_bucket_is_named() {
    let Some(moto) = moto() else { return };
    let err = StateStore::open(StoreConfig::Bucket(s3(moto.port, "no-such-bucket")))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::BucketMissing { bucket, .. } if bucket == "no-such-bucket"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "bucket \"no-such-bucket\" does not exist at 127.0.0.1:{}",
            moto.port
        )
    );
}

#[tokio::test]
async fn unreachable_endpoint_is_named() {
    let port = free_port(); // closed
    let err = StateStore::open(StoreConfig::Bucket(s3(port, "kratix")))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}

/// A closed port whose number holds "401" or "403" is still a closed port, not an auth or
/// permission failure: the class comes from the error, not from digits in its text.
#[tokio::test]
async fn a_closed_port_that_reads_like_a_status_is_unreachable() {
    let mut tried = 0;
    for port in [41401u16, 40301, 24010, 34030, 54013] {
        // Only ports nothing listens on say anything; skip one that is in use.
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        tried += 1;
        let err = StateStore::open(StoreConfig::Bucket(s3(port, "kratix")))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Unreachable { .. }),
            "port {port}: {err:?}"
        );
    }
    assert!(tried > 0, "every candidate port was in use");
}

#[tokio::test]
async fn plain_http_needs_insecure() {
    let mut c = s3(9, "kratix");
    c.insecure = false;
    c.endpoint = "http://127.0.0.1:9".into();
    let err = StateStore::open(StoreConfig::Bucket(c)).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidConfig { field, .. } if field == "endpoint"),
        "{err:?}"
    );
}

/// A proxy in front of moto that answers bulk delete (`POST /<bucket>?delete`) with 501
/// NotImplemented, as GCS's S3 interoperability mode does, and counts requests.
struct NoBulkDeleteProxy {
    port: u16,
    bulk_attempts: Arc<AtomicUsize>,
    single_deletes: Arc<AtomicUsize>,
    puts: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for NoBulkDeleteProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn no_bulk_delete_proxy(upstream: u16) -> NoBulkDeleteProxy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let bulk_attempts = Arc::new(AtomicUsize::new(0));
    let single_deletes = Arc::new(AtomicUsize::new(0));
    let puts = Arc::new(AtomicUsize::new(0));
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http();
    let (ba, sd, pu) = (bulk_attempts.clone(), single_deletes.clone(), puts.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let client = client.clone();
            let (ba, sd, pu) = (ba.clone(), sd.clone(), pu.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let client = client.clone();
                    let (ba, sd, pu) = (ba.clone(), sd.clone(), pu.clone());
                    async move {
                        let is_bulk = req.method() == hyper::Method::POST
                            && req.uri().query().is_some_and(|q| {
                                q.split('&').any(|p| p == "delete" || p == "delete=")
                            });
                        if is_bulk {
                            ba.fetch_add(1, Ordering::SeqCst);
                            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NotImplemented</Code><Message>A header or query you provided requested a function that is not implemented.</Message></Error>";
                            let resp: Response<BoxBody<Bytes, hyper::Error>> = Response::builder()
                                .status(501)
                                .header("content-type", "application/xml")
                                .body(
                                    Full::new(Bytes::from(body))
                                        .map_err(|never: Infallible| match never {})
                                        .boxed(),
                                )
                                .unwrap();
                            return Ok::<_, Infallible>(resp);
                        }
                        if req.method() == hyper::Method::DELETE {
                            sd.fetch_add(1, Ordering::SeqCst);
                        }
                        if req.method() == hyper::Method::PUT {
                            pu.fetch_add(1, Ordering::SeqCst);
                        }
                        let (mut parts, body) = req.into_parts();
                        let pq = parts
                            .uri
                            .path_and_query()
                            .map(|p| p.as_str().to_string())
                            .unwrap_or_else(|| "/".into());
                        parts.uri = format!("http://127.0.0.1:{upstream}{pq}").parse().unwrap();
                        let resp = client
                            .request(Request::from_parts(parts, body))
                            .await
                            .expect("upstream answers");
                        Ok(resp.map(|b| b.boxed()))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    NoBulkDeleteProxy {
        port,
        bulk_attempts,
        single_deletes,
        puts,
        task,
    }
}

#[tokio::test]
async fn deletes_fall_back_to_single_objects_b17() {
    let Some(moto) = moto() else { return };
    create_bucket(moto.port, "kratix");
    let proxy = no_bulk_delete_proxy(moto.port).await;
    let store = StateStore::open(StoreConfig::Bucket(s3(proxy.port, "kratix")))
        .await
        .unwrap();
    let dir = "dev/resources/default/widget/r1/configure/5058f";
    let files = [("1.yaml", "1\n"), ("2.yaml", "2\n"), ("3.yaml", "3\n")];
    store.write(replace("wp-r1", dir, &files)).await.unwrap();
    assert_eq!(proxy.puts.load(Ordering::SeqCst), 3);
    // Unchanged content: no PUT at all; one changed file: exactly one PUT.
    store.write(replace("wp-r1", dir, &files)).await.unwrap();
    assert_eq!(proxy.puts.load(Ordering::SeqCst), 3);
    let changed = [("1.yaml", "1\n"), ("2.yaml", "two\n"), ("3.yaml", "3\n")];
    store.write(replace("wp-r1", dir, &changed)).await.unwrap();
    assert_eq!(proxy.puts.load(Ordering::SeqCst), 4);
    let out = store
        .write(WriteRequest {
            name: "wp-r1".into(),
            ops: vec![WriteOp::DeleteDir { dir: dir.into() }],
        })
        .await
        .unwrap();
    assert!(out.changed);
    assert!(
        store.list("dev").await.unwrap().is_empty(),
        "all three removed"
    );
    // The client retries a 5xx at most 3 times before the writer falls back.
    let bulk = proxy.bulk_attempts.load(Ordering::SeqCst);
    assert!((1..=4).contains(&bulk), "bulk delete tried {bulk} times");
    assert_eq!(proxy.single_deletes.load(Ordering::SeqCst), 3);
    // Later deletes go straight to single-object deletes: no retry storm.
    store
        .write(replace("wp-r2", "dev/x", &[("a.yaml", "a\n")]))
        .await
        .unwrap();
    store
        .write(WriteRequest {
            name: "wp-r2".into(),
            ops: vec![WriteOp::DeleteDir {
                dir: "dev/x".into(),
            }],
        })
        .await
        .unwrap();
    assert_eq!(proxy.bulk_attempts.load(Ordering::SeqCst), bulk);
    assert_eq!(proxy.single_deletes.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn s3_reader_snapshot_compares_listing_etags() {
    let Some(moto) = moto() else { return };
    create_bucket(moto.port, "reader");
    let store = StateStore::open(StoreConfig::Bucket(s3(moto.port, "reader")))
        .await
        .unwrap();
    store
        .write(replace("w", "dest/resources", &[("a.yaml", "a: 1\n")]))
        .await
        .unwrap();
    store
        .write(replace("w2", "other", &[("b.yaml", "b: 1\n")]))
        .await
        .unwrap();
    let s1 = store.snapshot("dest", None).await.unwrap();
    assert_eq!(
        s1.files.clone().unwrap(),
        vec![("dest/resources/a.yaml".to_string(), b"a: 1\n".to_vec())]
    );
    assert!(
        store
            .snapshot("dest", Some(&s1.version))
            .await
            .unwrap()
            .files
            .is_none()
    );
    store
        .write(replace("w", "dest/resources", &[("a.yaml", "a: 2\n")]))
        .await
        .unwrap();
    let s2 = store.snapshot("dest", Some(&s1.version)).await.unwrap();
    assert_ne!(s2.version, s1.version);
    assert_eq!(s2.files.unwrap()[0].1, b"a: 2\n".to_vec());
}
