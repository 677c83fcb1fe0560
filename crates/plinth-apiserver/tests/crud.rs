//! In-process kube-rs tests: CRUD, optimistic concurrency, selectors, paging, watch.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use plinth_apiserver::testing::TestServer;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    c.data = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
    c
}

#[tokio::test]
async fn configmap_crud() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let created = api
        .create(&PostParams::default(), &cm("one", &[]))
        .await
        .unwrap();
    let md = &created.metadata;
    assert!(md.uid.is_some());
    assert!(md.creation_timestamp.is_some());
    assert!(
        md.resource_version
            .as_deref()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert_eq!(md.namespace.as_deref(), Some("default"));

    let got = api.get("one").await.unwrap();
    assert_eq!(got.data, created.data);

    let mut changed = got.clone();
    changed.data = Some(BTreeMap::from([("k".to_string(), "w".to_string())]));
    let updated = api
        .replace("one", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(updated.data.unwrap()["k"], "w");
    let rv1: u64 = got.metadata.resource_version.unwrap().parse().unwrap();
    let rv2: u64 = updated.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv2 > rv1);

    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert!(list.metadata.resource_version.is_some());

    // generateName
    let mut g = cm("", &[]);
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let gc = api.create(&PostParams::default(), &g).await.unwrap();
    assert!(gc.metadata.name.unwrap().starts_with("gen-"));

    // duplicate → 409 AlreadyExists
    let err = api
        .create(&PostParams::default(), &cm("one", &[]))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "AlreadyExists");
        }
        e => panic!("unexpected {e}"),
    }

    api.delete("one", &DeleteParams::default()).await.unwrap();
    match api.get("one").await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.reason, "NotFound");
        }
        e => panic!("unexpected {e}"),
    }

    // standard namespaces exist
    let nss: Api<Namespace> = Api::all(ts.client());
    for n in plinth_apiserver::STANDARD_NAMESPACES {
        nss.get(n).await.unwrap();
        // Each namespace has its `default` ServiceAccount.
        let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(ts.client(), n);
        sas.get("default").await.unwrap();
    }
}

#[tokio::test]
async fn stale_update_is_409() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let a = api
        .create(&PostParams::default(), &cm("c", &[]))
        .await
        .unwrap();
    let mut b = a.clone();
    b.data = Some(BTreeMap::from([("x".to_string(), "1".to_string())]));
    api.replace("c", &PostParams::default(), &b).await.unwrap();
    let mut stale = a.clone();
    stale.data = Some(BTreeMap::from([("x".to_string(), "2".to_string())]));
    match api
        .replace("c", &PostParams::default(), &stale)
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
        }
        e => panic!("unexpected {e}"),
    }
    assert_eq!(api.get("c").await.unwrap().data.unwrap()["x"], "1");
}

#[tokio::test]
async fn label_and_field_selectors() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    api.create(
        &PostParams::default(),
        &cm("a", &[("app", "web"), ("tier", "front")]),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &cm("b", &[("app", "db")]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("c", &[]))
        .await
        .unwrap();
    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect()
    };
    for (sel, want) in [
        ("app=web", vec!["a"]),
        ("app==web", vec!["a"]),
        ("app!=web", vec!["b", "c"]),
        ("app in (web,db)", vec!["a", "b"]),
        ("app notin (web)", vec!["b", "c"]),
        ("tier", vec!["a"]),
        ("!app", vec!["c"]),
    ] {
        let got = names(api.list(&ListParams::default().labels(sel)).await.unwrap());
        assert_eq!(got, want, "{sel}");
    }
    let got = names(
        api.list(&ListParams::default().fields("metadata.name=b"))
            .await
            .unwrap(),
    );
    assert_eq!(got, vec!["b"]);
    let all: Api<ConfigMap> = Api::all(ts.client());
    let got = names(
        all.list(&ListParams::default().fields("metadata.namespace=default,metadata.name!=b"))
            .await
            .unwrap(),
    );
    assert_eq!(got, vec!["a", "c"]);
    // malformed selector → 400
    match api
        .list(&ListParams::default().labels("app in (web"))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert_eq!(s.code, 400),
        e => panic!("unexpected {e}"),
    }
    // A field the resource is not selected by (a typo, or a data key) is refused, for a
    // list and for a delete of the collection, which deletes nothing.
    for sel in ["metadata.nmae!=b", "data.a=b", "status.phase=Running"] {
        match api
            .list(&ListParams::default().fields(sel))
            .await
            .unwrap_err()
        {
            kube::Error::Api(s) => {
                assert_eq!(s.code, 400, "{sel}");
                let field = sel.split(['=', '!']).next().unwrap();
                assert_eq!(s.message, format!("field label not supported: {field}"));
            }
            e => panic!("unexpected {e}"),
        }
        let err = api
            .delete_collection(&DeleteParams::default(), &ListParams::default().fields(sel))
            .await
            .unwrap_err();
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 400),
            "{sel}: {err}"
        );
    }
    let got = names(api.list(&ListParams::default()).await.unwrap());
    assert_eq!(got, vec!["a", "b", "c"], "nothing deleted");
}

#[tokio::test]
async fn paging_with_limit_and_continue() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    for i in 0..25 {
        api.create(&PostParams::default(), &cm(&format!("cm-{i:02}"), &[]))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(10);
    let mut pages = 0;
    let mut first_rv = None;
    loop {
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        first_rv.get_or_insert(page.metadata.resource_version.clone());
        assert_eq!(page.metadata.resource_version, *first_rv.as_ref().unwrap());
        seen.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    let want: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(seen, want);
}

#[tokio::test]
async fn watch_from_resource_version() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let a = api
        .create(&PostParams::default(), &cm("w1", &[]))
        .await
        .unwrap();
    let rv = a.metadata.resource_version.clone().unwrap();
    // Changes after `rv` happen before the watch starts: they are replayed from the log.
    api.create(&PostParams::default(), &cm("w2", &[]))
        .await
        .unwrap();
    api.delete("w1", &DeleteParams::default()).await.unwrap();
    let mut stream = api
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    // And a live one.
    api.create(&PostParams::default(), &cm("w3", &[]))
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(c) => got.push(format!("ADDED {}", c.metadata.name.unwrap())),
            WatchEvent::Modified(c) => got.push(format!("MODIFIED {}", c.metadata.name.unwrap())),
            WatchEvent::Deleted(c) => got.push(format!("DELETED {}", c.metadata.name.unwrap())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(got, vec!["ADDED w2", "DELETED w1", "ADDED w3"]);
}

#[tokio::test]
async fn filtered_watch_sees_objects_enter_and_leave_the_selector() {
    use kube::api::{Patch, PatchParams};
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let c = api
        .create(&PostParams::default(), &cm("f", &[("app", "other")]))
        .await
        .unwrap();
    let rv = c.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("app=web").timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    let set = |v: &str| Patch::Merge(serde_json::json!({"metadata": {"labels": {"app": v}}}));
    api.patch("f", &PatchParams::default(), &set("web"))
        .await
        .unwrap();
    api.patch("f", &PatchParams::default(), &set("other"))
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(_) => got.push("ADDED"),
            WatchEvent::Modified(_) => got.push("MODIFIED"),
            WatchEvent::Deleted(_) => got.push("DELETED"),
            _ => {}
        }
    }
    assert_eq!(got, vec!["ADDED", "DELETED"]);
}
