//! `plinth quickstart`: the main job in one command. Starts a platform in a temporary
//! (or given) data dir and a worker cluster beside it (`plinth worker worker-1`, in this
//! process), installs a sample Promise whose pipeline needs only a stock userland and
//! whose workloads go to the worker, requests a resource, follows it through the
//! workflow, scheduling and the Git write, prints what landed in the state store, and
//! ends with the Deployment and Service applied in the worker.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::cmd::worker::{Worker, WorkerArgs};
use crate::platform::{BOOTSTRAP_NAME, PLATFORM_DESTINATION, Platform, PlatformOptions};
use crate::progress::Progress;

// The sample users apply by hand too (README "Using it with kubectl").
const PROMISE_YAML: &str = include_str!("../../../../examples/webapp/promise.yaml");
const REQUEST_YAML: &str = include_str!("../../../../examples/webapp/request.yaml");

/// Arguments of `plinth quickstart`.
#[derive(clap::Args)]
pub struct QuickstartArgs {
    /// Data directory for the platform; a temporary one (removed at the end) by default.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Give up when the request is not fulfilled within this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Keep the temporary data directory (and print where it is) instead of removing it.
    #[arg(long)]
    keep: bool,
}

/// Runs `plinth quickstart`; exits non-zero naming the step that failed.
pub async fn run(args: QuickstartArgs) -> anyhow::Result<()> {
    // The sample pipeline writes to /kratix/output like every Kratix pipeline: without a
    // sandbox those paths do not exist, so say so up front rather than fail later.
    if plinth_runner::config::find_on_path("bwrap").is_none() {
        bail!(
            "plinth quickstart runs its pipeline in a bubblewrap sandbox, and `bwrap` is not on PATH; \
             install it (e.g. `apt-get install bubblewrap`, or run scripts/quickstart.sh, which does)"
        );
    }
    let started = Instant::now();
    let temp = match &args.data_dir {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("plinth-quickstart-")
                .tempdir()?,
        ),
    };
    let data_dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| temp.as_ref().expect("temp dir").path().to_path_buf());
    let deadline = started + Duration::from_secs(args.timeout);
    let progress = crate::progress::Progress::stdout_since(started);

    step(
        &progress,
        &format!("starting the platform in {}", data_dir.display()),
    );
    let platform = Platform::start(PlatformOptions {
        bootstrap: true,
        ..PlatformOptions::private(data_dir.clone())
    })
    .await
    .context("step 'start the platform' failed")?;
    let removed_at_exit = temp.is_some() && !args.keep;
    let worker = start_worker(&platform, &data_dir, &progress).await;
    let result = match &worker {
        Ok(w) => drive(&platform, w, &progress, deadline, removed_at_exit).await,
        Err(e) => Err(anyhow!("step 'start the worker' failed: {e:#}")),
    };
    let repo = platform.state_store_repo.clone();
    if let Ok(w) = worker {
        w.shutdown().await;
    }
    platform.shutdown().await;
    progress.finish();
    match result {
        Ok(()) => {
            if let (Some(t), true) = (temp, args.keep) {
                let kept = t.keep();
                println!("\nData directory kept at {}", kept.display());
            } else if args.data_dir.is_some() {
                println!(
                    "\nData directory: {} (state store: {})",
                    data_dir.display(),
                    repo.map(|r| r.display().to_string()).unwrap_or_default()
                );
            }
            println!(
                "Quickstart finished in {:.1}s.",
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Err(e) => {
            if let Some(t) = temp {
                let kept = t.keep();
                eprintln!(
                    "\nThe platform's data directory is kept for inspection: {}",
                    kept.display()
                );
            }
            Err(e)
        }
    }
}

/// Name of the worker cluster quickstart starts (and of its Destination).
const WORKER: &str = "worker-1";

/// Starts the worker cluster `worker-1` in `<data dir>/worker-1`, registered on the platform.
async fn start_worker(
    platform: &Platform,
    data_dir: &std::path::Path,
    progress: &Progress,
) -> anyhow::Result<Worker> {
    step(
        progress,
        &format!(
            "starting worker cluster {WORKER} (Destination {WORKER}, label environment={WORKER})"
        ),
    );
    let args = WorkerArgs {
        name: WORKER.into(),
        platform: platform.server.kubeconfig_path().unwrap_or_default(),
        data_dir: None,
        listen: "127.0.0.1:0".parse().expect("address"),
        labels: Vec::new(),
        state_store: None,
        interval_secs: 30,
        image_map: None,
        metrics_addr: None,
        health: Default::default(),
    };
    Worker::start(&args, platform.server.client(), data_dir.join(WORKER)).await
}

fn step(progress: &Progress, what: &str) {
    progress.step(what);
}

/// Runs the sample through the platform, one named step after another. `removed_at_exit`:
/// the data directory is a temporary one that goes away when quickstart ends, which the
/// kubectl hint says.
async fn drive(
    platform: &Platform,
    worker: &Worker,
    progress: &Progress,
    deadline: Instant,
    removed_at_exit: bool,
) -> anyhow::Result<()> {
    let client = platform.server.client();
    announce(platform, progress, removed_at_exit);
    install_promise(&client, progress, deadline).await?;
    let webapps = request_webapp(&client, progress).await?;
    let work = run_workflow(&client, progress, deadline).await?;
    wait_placement(&client, progress, deadline, &work).await?;
    let rr = wait_reconciled(&webapps, progress, deadline).await?;
    print_results(platform, progress, &rr)?;
    show_in_worker(worker, progress, deadline).await
}

/// Says where the API server and the local state store are.
fn announce(platform: &Platform, progress: &Progress, removed_at_exit: bool) {
    if let Some(kc) = platform.server.kubeconfig_path() {
        let lifetime = if removed_at_exit {
            "; it lasts while quickstart runs: add --keep or --data-dir DIR to use it afterwards"
        } else {
            ""
        };
        step(
            progress,
            &format!(
                "API server ready at https://{} (kubectl --kubeconfig {}{lifetime})",
                platform
                    .server
                    .https_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default(),
                kc.display()
            ),
        );
    }
    if let Some(repo) = &platform.state_store_repo {
        step(
            progress,
            &format!(
                "local state store: GitStateStore/{BOOTSTRAP_NAME} at file://{} (Destinations {BOOTSTRAP_NAME}, {PLATFORM_DESTINATION}, {WORKER})",
                repo.display()
            ),
        );
    }
}

/// Installs the sample Promise (its workloads go to the worker) and waits until it is
/// Available.
async fn install_promise(
    client: &kube::Client,
    progress: &Progress,
    deadline: Instant,
) -> anyhow::Result<()> {
    let mut promise: Value = serde_saphyr::from_str(PROMISE_YAML)
        .context("the built-in sample Promise does not parse")?;
    // The workloads go to the worker started beside the platform.
    promise["spec"]["destinationSelectors"] =
        serde_json::json!([{"matchLabels": {"environment": WORKER}}]);
    let promises: Api<DynamicObject> =
        Api::all_with(client.clone(), &kratix("Promise", "promises"));
    step(
        progress,
        &format!("installing Promise webapp (destinationSelectors environment={WORKER})"),
    );
    match promises
        .create(&PostParams::default(), &serde_json::from_value(promise)?)
        .await
    {
        Ok(_) => {}
        // A data dir from an earlier run: use what is there.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            step(progress, "Promise webapp exists already; reusing it")
        }
        Err(e) => {
            return Err(anyhow!(
                "step 'install the Promise' failed: {}",
                api_message(&e)
            ));
        }
    }
    wait(deadline, "Promise webapp to become Available", || async {
        let p = promises.get("webapp").await?;
        Ok(plinth_api::constants::promise_status::is_available(
            &p.data["status"],
        ))
    })
    .await?;
    step(
        progress,
        "Promise webapp is Available (CRD webapps.quickstart.plinth.dev established)",
    );
    Ok(())
}

/// Creates the sample request `WebApp default/hello` (reusing one from an earlier run).
async fn request_webapp(
    client: &kube::Client,
    progress: &Progress,
) -> anyhow::Result<Api<DynamicObject>> {
    let request: Value = serde_saphyr::from_str(REQUEST_YAML)
        .context("the built-in sample request does not parse")?;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("quickstart.plinth.dev", "v1alpha1", "WebApp"),
        "webapps",
    );
    let webapps: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    step(progress, "requesting WebApp default/hello");
    match webapps
        .create(&PostParams::default(), &serde_json::from_value(request)?)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {
            step(progress, "WebApp default/hello exists already; reusing it")
        }
        Err(e) => {
            return Err(anyhow!(
                "step 'create the resource request' failed: {}",
                api_message(&e)
            ));
        }
    }
    Ok(webapps)
}

/// Waits for the request's workflow Job, then for the Work its pipeline outputs; a
/// failed Job ends the wait with the Job's logs.
async fn run_workflow(
    client: &kube::Client,
    progress: &Progress,
    deadline: Instant,
) -> anyhow::Result<DynamicObject> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let sel = "kratix.io/promise-name=webapp,kratix.io/resource-name=hello";
    let job = wait_value(deadline, "the resource workflow's Job", || async {
        Ok(jobs
            .list(&ListParams::default().labels(sel))
            .await?
            .items
            .into_iter()
            .next())
    })
    .await?;
    step(
        progress,
        &format!("workflow running: Job {} (pipeline render)", job.name_any()),
    );

    let works: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &kratix("Work", "works"));
    let wait_work = wait_value(deadline, "the Work from the pipeline's output", || async {
        if let Some(failed) = failed_job(&jobs, sel).await? {
            return Err(anyhow!(
                "the pipeline Job {failed} failed:\n{}",
                job_logs(client, &failed).await
            ));
        }
        Ok(works
            .list(&ListParams::default().labels(sel))
            .await?
            .items
            .into_iter()
            .next())
    })
    .await;
    let work = wait_work.context("step 'run the workflow' failed")?;
    step(progress, &format!("Work {} created", work.name_any()));
    Ok(work)
}

/// Waits until a WorkPlacement of `work` is written to the state store (a write failure
/// ends the wait with its message).
async fn wait_placement(
    client: &kube::Client,
    progress: &Progress,
    deadline: Instant,
    work: &DynamicObject,
) -> anyhow::Result<()> {
    let placements: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &kratix("WorkPlacement", "workplacements"),
    );
    let wp_sel = format!("kratix.io/work={}", work.name_any());
    let placement = wait_value(
        deadline,
        "a WorkPlacement written to the state store",
        || async {
            let list = placements
                .list(&ListParams::default().labels(&wp_sel))
                .await?
                .items;
            for wp in &list {
                if let Some(c) = condition(&wp.data["status"], "WriteSucceeded")
                    && c["status"] == "False"
                {
                    return Err(anyhow!(
                        "WorkPlacement {} could not be written: {}",
                        wp.name_any(),
                        c["message"]
                    ));
                }
            }
            Ok(list.into_iter().find(|wp| {
                condition(&wp.data["status"], "Ready").is_some_and(|c| c["status"] == "True")
            }))
        },
    )
    .await
    .context("step 'schedule and write the Work' failed")?;
    step(
        progress,
        &format!(
            "scheduled to Destination {} and written (commit {})",
            placement.data["spec"]["targetDestinationName"]
                .as_str()
                .unwrap_or("?"),
            placement.data["status"]["versionID"]
                .as_str()
                .unwrap_or("?")
        ),
    );
    Ok(())
}

/// Waits until the request is Reconciled and returns it.
async fn wait_reconciled(
    webapps: &Api<DynamicObject>,
    progress: &Progress,
    deadline: Instant,
) -> anyhow::Result<DynamicObject> {
    let rr = wait_value(
        deadline,
        "WebApp default/hello to be Reconciled",
        || async {
            let rr = webapps.get("hello").await?;
            let reconciled =
                condition(&rr.data["status"], "Reconciled").is_some_and(|c| c["status"] == "True");
            Ok(reconciled.then_some(rr))
        },
    )
    .await
    .context("step 'reconcile the request' failed")?;
    step(progress, "WebApp default/hello is Reconciled");
    Ok(rr)
}

/// Prints the state store's files and the request's status.
fn print_results(
    platform: &Platform,
    progress: &Progress,
    rr: &DynamicObject,
) -> anyhow::Result<()> {
    if let Some(repo) = &platform.state_store_repo {
        progress.clear();
        println!(
            "\nFiles the request and its Promise wrote to the state store ({}):",
            repo.display()
        );
        // Only the sample's own files: every Destination's canary files share the store.
        let ours = [
            format!("{WORKER}/resources/default/webapp/hello/"),
            format!("{WORKER}/dependencies/webapp/"),
        ];
        for (path, content) in repo_files(repo)?
            .into_iter()
            .filter(|(p, _)| ours.iter().any(|o| p.starts_with(o.as_str())))
        {
            let content = crate::redact::documents(&content);
            println!("--- {path}");
            print!("{content}");
            if !content.ends_with('\n') {
                println!();
            }
        }
    }
    progress.clear();
    println!("\nStatus of WebApp default/hello:");
    print!(
        "{}",
        serde_saphyr::to_string(&rr.data["status"]).unwrap_or_default()
    );
    Ok(())
}

/// Waits until the worker's agent applied the sample's Deployment and Service, then
/// lists them with the kubectl command that shows them.
async fn show_in_worker(
    worker: &Worker,
    progress: &Progress,
    deadline: Instant,
) -> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Service;
    let client = worker.platform.server.client();
    let deployments: Api<Deployment> = Api::all(client.clone());
    let services: Api<Service> = Api::all(client.clone());
    wait(
        deadline,
        "Deployment and Service webapps/hello in the worker",
        || async {
            let d = Api::<Deployment>::namespaced(client.clone(), "webapps")
                .get_opt("hello")
                .await?;
            let s = Api::<Service>::namespaced(client.clone(), "webapps")
                .get_opt("hello")
                .await?;
            Ok(d.is_some() && s.is_some())
        },
    )
    .await
    .context("step 'apply the workload in the worker' failed")?;
    step(
        progress,
        &format!("Deployment and Service webapps/hello applied in worker {WORKER}"),
    );
    let kc = worker
        .platform
        .server
        .kubeconfig_path()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    progress.clear();
    println!("\nIn worker {WORKER} (kubectl --kubeconfig {kc} get deploy,svc -A)");
    println!("{:<12} {:<32} DETAIL", "NAMESPACE", "NAME");
    for d in deployments.list(&ListParams::default()).await?.items {
        let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        println!(
            "{:<12} {:<32} replicas: {replicas}",
            d.namespace().unwrap_or_default(),
            format!("deployment.apps/{}", d.name_any())
        );
    }
    for s in services.list(&ListParams::default()).await?.items {
        let ip = s
            .spec
            .as_ref()
            .and_then(|s| s.cluster_ip.clone())
            .unwrap_or_else(|| "<none>".into());
        println!(
            "{:<12} {:<32} cluster IP: {ip}",
            s.namespace().unwrap_or_default(),
            format!("service/{}", s.name_any())
        );
    }
    Ok(())
}

/// The API's own message for an API error, the client's text otherwise.
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

fn kratix(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", kind),
        plural,
    )
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The first Job of `sel` that failed or has a failed attempt: the quickstart's pipeline
/// is deterministic, so a failed attempt will not succeed on retry.
async fn failed_job(jobs: &Api<Job>, sel: &str) -> anyhow::Result<Option<String>> {
    for j in jobs.list(&ListParams::default().labels(sel)).await?.items {
        let status = j.status.clone().unwrap_or_default();
        let failed = status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Failed" && c.status == "True");
        if failed || status.failed.unwrap_or(0) > 0 {
            return Ok(Some(j.name_any()));
        }
    }
    Ok(None)
}

/// The logs of every container of the Job's pods, for a failure report.
async fn job_logs(client: &Client, job: &str) -> String {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    let mut out = String::new();
    let Ok(list) = pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
    else {
        return out;
    };
    for pod in list.items {
        let spec = pod.spec.clone().unwrap_or_default();
        for c in spec
            .init_containers
            .unwrap_or_default()
            .into_iter()
            .chain(spec.containers)
        {
            let lp = kube::api::LogParams {
                container: Some(c.name.clone()),
                ..Default::default()
            };
            if let Ok(log) = pods.logs(&pod.name_any(), &lp).await
                && !log.trim().is_empty()
            {
                out.push_str(&format!("  [{}/{}]\n", pod.name_any(), c.name));
                for line in log.lines() {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        }
    }
    out
}

/// Every file on the bare repository's `main` branch, with its content.
fn repo_files(repo: &std::path::Path) -> anyhow::Result<Vec<(String, String)>> {
    let repo =
        git2::Repository::open_bare(repo).with_context(|| format!("opening {}", repo.display()))?;
    let tree = repo.revparse_single("main")?.peel_to_tree()?;
    let mut files = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if let Some(Ok(blob)) = (entry.kind() == Some(git2::ObjectType::Blob))
            .then(|| entry.to_object(&repo).and_then(|o| o.peel_to_blob()))
        {
            files.push((
                format!("{dir}{}", entry.name().unwrap_or("?")),
                String::from_utf8_lossy(blob.content()).into_owned(),
            ));
        }
        git2::TreeWalkResult::Ok
    })?;
    Ok(files)
}

async fn wait<F, Fut>(deadline: Instant, what: &str, mut f: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    wait_value(deadline, what, || {
        let fut = f();
        async move { Ok(fut.await?.then_some(())) }
    })
    .await
}

/// Polls `f` until it yields a value, fails, or the deadline passes. A CLI waiting on
/// the user's behalf, not a reconcile loop: polling keeps it simple.
async fn wait_value<T, F, Fut>(deadline: Instant, what: &str, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let mut last_err = None;
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => {
                if e.downcast_ref::<kube::Error>().is_none() {
                    return Err(e);
                }
                last_err = Some(e);
            }
        }
        if Instant::now() > deadline {
            match last_err {
                Some(e) => bail!("timed out waiting for {what}; last error: {e:#}"),
                None => bail!("timed out waiting for {what}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
