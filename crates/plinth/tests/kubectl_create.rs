//! Every `kubectl create <kind>` (and `kubectl run`) for the built-in kinds the server
//! serves: kubectl's typed clients send these bodies as protobuf, which the server
//! decodes into the same objects a JSON body gives.

mod support;

use serde_json::Value;
use support::Plinth;

fn kubectl_available() -> bool {
    std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn get(p: &Plinth, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&p.kubectl(&a)).expect("JSON from kubectl get")
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_create_works_for_every_served_built_in_kind() {
    if !kubectl_available() {
        println!("SKIPPED: kubectl not found");
        return;
    }
    let p = Plinth::up(&["--no-controllers"]).await;

    let out = p.kubectl(&[
        "create",
        "job",
        "hello",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ]);
    assert!(out.contains("job.batch/hello created"), "{out}");
    let job = get(&p, &["job", "hello"]);
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["name"], "hello");
    assert_eq!(c["image"], "busybox");
    assert_eq!(c["command"], serde_json::json!(["echo", "hi"]));
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    assert!(
        job["spec"]["template"]["metadata"]
            .get("creationTimestamp")
            .is_none_or(Value::is_null)
    );

    p.kubectl(&["create", "namespace", "team-a"]);
    assert_eq!(
        get(&p, &["namespace", "team-a"])["status"]["phase"],
        "Active"
    );

    p.kubectl(&[
        "create",
        "configmap",
        "cfg",
        "--from-literal=a=1",
        "--from-literal=empty=",
    ]);
    let cm = get(&p, &["configmap", "cfg"]);
    assert_eq!(cm["data"], serde_json::json!({"a": "1", "empty": ""}));

    p.kubectl(&[
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=password=hunter2",
    ]);
    let s = get(&p, &["secret", "s"]);
    assert_eq!(s["data"]["password"], "aHVudGVyMg==");
    assert_eq!(s["type"], "Opaque");

    p.kubectl(&["create", "serviceaccount", "builder"]);
    get(&p, &["serviceaccount", "builder"]);
    let token = p.kubectl(&["create", "token", "builder"]);
    assert!(token.trim().len() > 20, "{token}");

    p.kubectl(&[
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=pods,configmaps",
    ]);
    let role = get(&p, &["role", "reader"]);
    assert_eq!(
        role["rules"][0]["verbs"],
        serde_json::json!(["get", "list"])
    );

    p.kubectl(&[
        "create",
        "rolebinding",
        "rb",
        "--role=reader",
        "--serviceaccount=default:builder",
    ]);
    let rb = get(&p, &["rolebinding", "rb"]);
    assert_eq!(rb["roleRef"]["name"], "reader");
    assert_eq!(rb["subjects"][0]["name"], "builder");

    p.kubectl(&[
        "create",
        "clusterrole",
        "cr",
        "--verb=get",
        "--resource=namespaces",
    ]);
    assert_eq!(
        get(&p, &["clusterrole", "cr"])["rules"][0]["resources"][0],
        "namespaces"
    );

    p.kubectl(&[
        "create",
        "clusterrolebinding",
        "crb",
        "--clusterrole=cr",
        "--user=alice",
    ]);
    assert_eq!(
        get(&p, &["clusterrolebinding", "crb"])["subjects"][0]["name"],
        "alice"
    );

    let out = p.kubectl(&[
        "run",
        "debug",
        "--image=busybox",
        "--restart=Never",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]);
    assert!(out.contains("pod/debug created"), "{out}");
    let pod = get(&p, &["pod", "debug"]);
    assert_eq!(
        pod["spec"]["containers"][0]["args"],
        serde_json::json!(["sh", "-c", "echo hi"])
    );
    assert_eq!(pod["metadata"]["labels"]["run"], "debug");

    let out = p.kubectl(&["auth", "can-i", "create", "jobs"]);
    assert_eq!(out.trim(), "yes");
}
