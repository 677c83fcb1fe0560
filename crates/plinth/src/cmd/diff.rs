//! `plinth diff PROMISE.yaml`: what applying a Promise update would do on a running
//! platform, before anything is applied.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::authoring::preview::{PreviewOptions, preview};
use crate::authoring::render::PlainLines;

/// Arguments of `plinth diff`.
#[derive(clap::Args)]
#[command(
    long_about = "Shows what applying a Promise update would do on a running platform: the \
change to the Promise's spec, which of its requests would re-run their configure workflow, \
and how each one's outputs would change (the request rendered with the new Promise on this \
machine, as `plinth render` does, compared with the Works it has now). Nothing is written \
to the platform.\n\nExit status, as for `kubectl diff`: 0 when applying the file changes nothing, \
1 when it changes something (the Promise's spec, so requests re-run), 2 or more on an error.",
    after_help = "Examples:\n  plinth diff promise.yaml\n  \
plinth diff promise.yaml --kubeconfig ~/.local/share/plinth/kubeconfig --image-map images.yaml"
)]
pub struct DiffArgs {
    /// The updated Promise.
    promise: PathBuf,
    /// Kubeconfig of the platform [default: KUBECONFIG, ~/.kube/config, in-cluster, then the
    /// kubeconfig of `plinth up` in its data dir].
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Image map for rendering [default: images.yaml next to the Promise file, when present].
    #[arg(long, env = "PLINTH_IMAGE_MAP")]
    image_map: Option<PathBuf>,
    /// Give up on a request's render after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
}

/// Runs `plinth diff`: exit status 0 when applying changes nothing, 1 when it changes
/// something (an error is 2, set by the caller).
pub async fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let promise = crate::cmd::render::read_promise(&args.promise)?;
    let client = crate::cmd::operator::platform_client(args.kubeconfig.as_deref()).await?;
    let opts = PreviewOptions {
        image_map: args
            .image_map
            .clone()
            .or_else(|| crate::cmd::render::default_image_map(&args.promise)),
        timeout: Duration::from_secs(args.timeout),
    };
    let p = preview(&client, &promise, &opts, &PlainLines).await?;
    if p.new_promise {
        println!(
            "Promise {} is not installed: applying it installs it; no request re-runs.",
            p.promise
        );
        return Ok(ExitCode::from(1));
    }
    let Some(spec_diff) = &p.spec_diff else {
        println!("Promise {} is unchanged: no request re-runs.", p.promise);
        return Ok(ExitCode::SUCCESS);
    };
    println!("Promise {} spec changes:\n{spec_diff}", p.promise);
    println!(
        "{} request(s) would re-run their configure workflow:",
        p.requests.len()
    );
    for r in &p.requests {
        match (&r.failure, r.diffs.is_empty()) {
            (Some(f), _) => println!(
                "  {}/{}: the new workflow would FAIL: {}",
                r.namespace,
                r.name,
                crate::cmd::render::failure_line(f)
            ),
            (None, true) => println!("  {}/{}: outputs unchanged", r.namespace, r.name),
            (None, false) => {
                println!("  {}/{}: outputs change", r.namespace, r.name);
                for d in &r.diffs {
                    println!("{d}");
                }
            }
        }
    }
    Ok(ExitCode::from(1))
}
