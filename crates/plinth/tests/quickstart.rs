//! `plinth quickstart` as a user runs it: exit 0, every step reported, the written files
//! and the request's status printed, and the workload listed in the worker cluster.

use std::process::Command;

#[test]
fn quickstart_runs_the_main_job_and_prints_the_written_files() {
    let out = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["quickstart", "--timeout", "120"])
        .output()
        .expect("run plinth quickstart");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "quickstart failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for step in [
        "Promise webapp is Available",
        "workflow running: Job kratix-webapp-hello-render-",
        "Work webapp-hello-render-",
        "starting worker cluster worker-1",
        "scheduled to Destination worker-1 and written (commit ",
        "WebApp default/hello is Reconciled",
        "Deployment and Service webapps/hello applied in worker worker-1",
    ] {
        assert!(stdout.contains(step), "missing step {step:?} in:\n{stdout}");
    }
    // Kratix's layout: resources/<ns>/<promise>/<request>/<pipeline>/<group id[0:5]>/...
    assert!(
        stdout.contains("--- worker-1/resources/default/webapp/hello/render/5058f/deployment.yaml"),
        "{stdout}"
    );
    assert!(
        stdout.contains("--- worker-1/dependencies/webapp/5058f/static/webapp-dependencies.yaml"),
        "{stdout}"
    );
    // Only the sample's files: no Destination's canary files.
    assert!(!stdout.contains("kratix-canary"), "{stdout}");
    assert!(stdout.contains("image: nginx:1.27"), "{stdout}");
    assert!(
        stdout.contains("url: http://hello.webapps.svc"),
        "the pipeline's status.yaml reached the request: {stdout}"
    );
    // The worker's agent applied the files: kubectl get deploy,svc -A on the worker.
    let listing = stdout
        .split_once("get deploy,svc -A)\n")
        .map(|(_, l)| l)
        .unwrap_or_else(|| panic!("no worker listing in:\n{stdout}"));
    assert!(
        listing.contains("webapps") && listing.contains("deployment.apps/hello"),
        "{listing}"
    );
    assert!(listing.contains("replicas: 2"), "{listing}");
    assert!(listing.contains("service/hello"), "{listing}");
}

#[test]
fn quickstart_fails_clearly_when_the_data_dir_is_unusable() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["quickstart", "--timeout", "20", "--data-dir"])
        .arg(file.path())
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run plinth quickstart");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("step 'start the platform' failed"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&file.path().display().to_string()),
        "names the directory: {stderr}"
    );
}
