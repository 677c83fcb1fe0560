//! The HTTPS listener under a flood of idle connections (loopback, bounded in count and
//! time): connections beyond the cap wait, silent ones are closed after the handshake
//! timeout, a real client is answered once they are gone, and a watch is never taken
//! for an idle connection.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use plinth_apiserver::testing::TestServer;
use tokio::io::AsyncReadExt;

async fn client(ts: &TestServer) -> kube::Client {
    let kc = Kubeconfig::read_from(ts.kubeconfig().unwrap()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

const CAP: usize = 4;
const HANDSHAKE: Duration = Duration::from_secs(1);
const IDLE_CONNECTIONS: usize = 24;

#[tokio::test(flavor = "multi_thread")]
async fn idle_connections_are_capped_and_reaped_and_a_real_client_gets_through() {
    let ts = TestServer::start_with(|c| {
        c.listen = Some("127.0.0.1:0".parse().unwrap());
        c.listener.max_connections = CAP;
        c.listener.handshake_timeout = HANDSHAKE;
    })
    .await
    .unwrap();
    let addr = ts.server().https_addr().unwrap();
    let started = Instant::now();
    // Connections that never send a byte; each task reports when the server closed it.
    let (tx, mut closed) = tokio::sync::mpsc::unbounded_channel::<Duration>();
    let mut held = Vec::new();
    for _ in 0..IDLE_CONNECTIONS {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let tx = tx.clone();
        held.push(tokio::spawn(async move {
            let mut buf = [0u8; 16];
            // EOF or a reset: the server closed it.
            let _ = s.read(&mut buf).await;
            let _ = tx.send(started.elapsed());
        }));
    }
    drop(tx);
    // Only `CAP` connections are taken at a time, each for one handshake timeout: by 1.5
    // timeouts at most one batch can have been closed.
    tokio::time::sleep(HANDSHAKE * 3 / 2).await;
    let mut times = Vec::new();
    while let Ok(t) = closed.try_recv() {
        times.push(t);
    }
    assert!(
        !times.is_empty() && times.len() <= CAP,
        "{} connections closed after 1.5 handshake timeouts (cap {CAP}): {times:?}",
        times.len()
    );
    // All of them are closed in bounded time…
    let deadline = Duration::from_secs(60);
    while times.len() < IDLE_CONNECTIONS {
        match tokio::time::timeout(deadline.saturating_sub(started.elapsed()), closed.recv()).await
        {
            Ok(Some(t)) => times.push(t),
            Ok(None) => break,
            Err(_) => panic!(
                "only {} of {IDLE_CONNECTIONS} idle connections closed in {deadline:?}",
                times.len()
            ),
        }
    }
    assert_eq!(times.len(), IDLE_CONNECTIONS);
    // …never faster than the cap allows.
    let batches = IDLE_CONNECTIONS.div_ceil(CAP) as u32;
    assert!(
        started.elapsed() >= HANDSHAKE * (batches - 1),
        "{IDLE_CONNECTIONS} connections closed in {:?}: the cap of {CAP} was not kept",
        started.elapsed()
    );
    // A real client is answered.
    let c = client(&ts).await;
    let req = http::Request::get("/readyz").body(Vec::new()).unwrap();
    let ok = tokio::time::timeout(Duration::from_secs(20), c.request_text(req))
        .await
        .expect("/readyz answered within 20 s")
        .unwrap();
    assert_eq!(ok, "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_client_waiting_behind_a_flood_is_answered_once_it_is_reaped() {
    let ts = TestServer::start_with(|c| {
        c.listen = Some("127.0.0.1:0".parse().unwrap());
        c.listener.max_connections = CAP;
        c.listener.handshake_timeout = Duration::from_millis(300);
    })
    .await
    .unwrap();
    let addr = ts.server().https_addr().unwrap();
    let mut held = Vec::new();
    for _ in 0..IDLE_CONNECTIONS {
        held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let c = client(&ts).await;
    let req = http::Request::get("/readyz").body(Vec::new()).unwrap();
    let started = Instant::now();
    let ok = tokio::time::timeout(Duration::from_secs(30), c.request_text(req))
        .await
        .expect("/readyz answered within 30 s although the idle connections are still held")
        .unwrap();
    assert_eq!(ok, "ok");
    // It waited behind the silent connections (they were ahead of it in the backlog).
    assert!(started.elapsed() >= Duration::from_millis(300 * 5));
    drop(held);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_outlives_the_idle_timeout() {
    let ts = TestServer::start_with(|c| {
        c.listen = Some("127.0.0.1:0".parse().unwrap());
        c.listener.idle_timeout = Duration::from_millis(500);
        c.listener.handshake_timeout = Duration::from_millis(500);
    })
    .await
    .unwrap();
    let c = client(&ts).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    use futures::StreamExt;
    let mut events = cms
        .watch(&WatchParams::default().timeout(60), "0")
        .await
        .unwrap()
        .boxed();
    // Longer than the idle timeout with nothing to send on the watch.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("late".into());
    let writer: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    writer.create(&PostParams::default(), &cm).await.unwrap();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("an event within 10 s")
            .expect("the watch is still open")
            .unwrap();
        if let WatchEvent::Added(o) = ev
            && o.metadata.name.as_deref() == Some("late")
        {
            break;
        }
    }
}
