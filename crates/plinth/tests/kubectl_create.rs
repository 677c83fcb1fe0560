//! Every `kubectl create <kind>` (and `kubectl run`) for the built-in kinds the server
//! serves: kubectl's typed clients send these bodies as protobuf, which the server
//! decodes into the same objects a JSON body gives.

use crate::support;

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

/// The subcommands `kubectl create <path> --help` lists under "Available Commands:"
/// (the leaves: `secret` and `service` list their own).
fn create_subcommands(p: &Plinth, path: &[&str]) -> Vec<Vec<String>> {
    let mut args = vec!["create"];
    args.extend_from_slice(path);
    args.push("--help");
    let help = p.kubectl(&args);
    let Some(section) = help.split("Available Commands:").nth(1) else {
        return vec![path.iter().map(|s| s.to_string()).collect()];
    };
    let mut out = Vec::new();
    for line in section.lines().skip(1) {
        let Some(name) = line.split_whitespace().next() else {
            break;
        };
        let mut sub: Vec<&str> = path.to_vec();
        sub.push(name);
        out.extend(create_subcommands(p, &sub));
    }
    out
}

/// For each `kubectl create` leaf: its arguments, the object to read back, and one
/// (JSON pointer, value) the created object must hold.
fn create_invocation(
    path: &str,
    tls: &std::path::Path,
) -> Option<(Vec<String>, &'static str, &'static str, Value)> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let (cert, key) = (
        format!("--cert={}", tls.join("tls.crt").display()),
        format!("--key={}", tls.join("tls.key").display()),
    );
    Some(match path {
        "clusterrole" => (
            s(&["c-role", "--verb=get", "--resource=pods"]),
            "clusterrole/c-role",
            "/rules/0/verbs/0",
            "get".into(),
        ),
        "clusterrolebinding" => (
            s(&["c-rb", "--clusterrole=view", "--user=alice"]),
            "clusterrolebinding/c-rb",
            "/roleRef/name",
            "view".into(),
        ),
        "configmap" => (
            s(&["c-cm", "--from-literal=a=1"]),
            "configmap/c-cm",
            "/data/a",
            "1".into(),
        ),
        "cronjob" => (
            s(&["c-cj", "--image=busybox", "--schedule=*/5 * * * *"]),
            "cronjob/c-cj",
            "/spec/schedule",
            "*/5 * * * *".into(),
        ),
        "deployment" => (
            s(&["c-deploy", "--image=nginx", "--replicas=2"]),
            "deployment/c-deploy",
            "/spec/replicas",
            2.into(),
        ),
        "ingress" => (
            s(&["c-ing", "--rule=example.com/=svc:80"]),
            "ingress/c-ing",
            "/spec/rules/0/host",
            "example.com".into(),
        ),
        "job" => (
            s(&["c-job", "--image=busybox"]),
            "job/c-job",
            "/spec/template/spec/containers/0/image",
            "busybox".into(),
        ),
        "namespace" => (
            s(&["c-ns"]),
            "namespace/c-ns",
            "/status/phase",
            "Active".into(),
        ),
        "poddisruptionbudget" => (
            s(&["c-pdb", "--selector=app=web", "--min-available=1"]),
            "pdb/c-pdb",
            "/spec/minAvailable",
            1.into(),
        ),
        "priorityclass" => (
            s(&["c-pc", "--value=0", "--description=low"]),
            "priorityclass/c-pc",
            "/value",
            0.into(),
        ),
        "quota" => (
            s(&["c-quota", "--hard=pods=3"]),
            "resourcequota/c-quota",
            "/spec/hard/pods",
            "3".into(),
        ),
        "role" => (
            s(&["c-r", "--verb=list", "--resource=configmaps"]),
            "role/c-r",
            "/rules/0/resources/0",
            "configmaps".into(),
        ),
        "rolebinding" => (
            s(&["c-rbind", "--role=c-r", "--user=bob"]),
            "rolebinding/c-rbind",
            "/subjects/0/name",
            "bob".into(),
        ),
        "secret docker-registry" => (
            s(&[
                "c-dockercfg",
                "--docker-server=r.example.com",
                "--docker-username=u",
                "--docker-password=p",
            ]),
            "secret/c-dockercfg",
            "/type",
            "kubernetes.io/dockerconfigjson".into(),
        ),
        "secret generic" => (
            s(&["c-secret", "--from-literal=k=v"]),
            "secret/c-secret",
            "/data/k",
            "dg==".into(),
        ),
        "secret tls" => (
            vec!["c-tls".into(), cert, key],
            "secret/c-tls",
            "/type",
            "kubernetes.io/tls".into(),
        ),
        "service clusterip" => (
            s(&["c-svc-ip", "--tcp=80:8080"]),
            "service/c-svc-ip",
            "/spec/ports/0/targetPort",
            8080.into(),
        ),
        "service externalname" => (
            s(&["c-svc-ext", "--external-name=db.example.com"]),
            "service/c-svc-ext",
            "/spec/externalName",
            "db.example.com".into(),
        ),
        "service loadbalancer" => (
            s(&["c-svc-lb", "--tcp=443:8443"]),
            "service/c-svc-lb",
            "/spec/type",
            "LoadBalancer".into(),
        ),
        "service nodeport" => (
            s(&["c-svc-np", "--tcp=80:8080"]),
            "service/c-svc-np",
            "/spec/type",
            "NodePort".into(),
        ),
        "serviceaccount" => (
            s(&["c-sa"]),
            "serviceaccount/c-sa",
            "/metadata/name",
            "c-sa".into(),
        ),
        // `create token` returns a token, not an object; it needs the ServiceAccount above.
        "token" => (s(&["c-sa"]), "", "", Value::Null),
        _ => return None,
    })
}

/// Every subcommand `kubectl create --help` lists (so a new one is covered, or named as
/// missing here), run against the server: kubectl's typed clients send these bodies as
/// protobuf, and the object read back holds what the flags said.
#[tokio::test(flavor = "multi_thread")]
async fn every_subcommand_of_kubectl_create_creates_its_object() {
    if !kubectl_available() {
        println!("SKIPPED: kubectl not found");
        return;
    }
    let p = Plinth::up(&["--no-controllers"]).await;
    let tls = tempfile::tempdir().unwrap();
    let openssl = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=c-tls",
        ])
        .arg("-keyout")
        .arg(tls.path().join("tls.key"))
        .arg("-out")
        .arg(tls.path().join("tls.crt"))
        .output()
        .expect("run openssl");
    assert!(openssl.status.success(), "{openssl:?}");

    let mut leaves = create_subcommands(&p, &[]);
    // The ServiceAccount before the token request for it.
    leaves.sort_by_key(|l| l == &["token"]);
    assert!(
        leaves.len() >= 17,
        "kubectl create --help listed too little: {leaves:?}"
    );
    let mut unknown = Vec::new();
    for leaf in &leaves {
        let path = leaf.join(" ");
        let Some((args, object, pointer, want)) = create_invocation(&path, tls.path()) else {
            unknown.push(path);
            continue;
        };
        let mut cmd: Vec<&str> = vec!["create"];
        cmd.extend(leaf.iter().map(String::as_str));
        cmd.extend(args.iter().map(String::as_str));
        let out = p.kubectl(&cmd);
        if object.is_empty() {
            assert!(out.trim().len() > 20, "kubectl create {path}: {out}");
            continue;
        }
        let got = get(&p, &[object]);
        assert_eq!(
            got.pointer(pointer),
            Some(&want),
            "kubectl create {path}: {object} {pointer} in {got}"
        );
    }
    assert!(
        unknown.is_empty(),
        "kubectl create lists subcommands this test has no invocation for: {unknown:?}"
    );
}
