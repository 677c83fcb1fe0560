//! `plinth health [PROMISE [NAMESPACE/NAME]]`: the health of resource requests as the
//! platform recorded it — state, uptime over 1 h / 24 h / 7 d / 30 d, time to first
//! healthy, last recovery and a 24-hour text timeline; per Promise the combined uptime.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

/// Arguments of `plinth health`.
#[derive(Args, Debug)]
pub struct HealthArgs {
    /// Only this Promise's requests.
    pub promise: Option<String>,
    /// Only this request, as NAMESPACE/NAME (needs PROMISE).
    pub request: Option<String>,
    /// Kubeconfig of the platform (default: KUBECONFIG, ~/.kube/config, in-cluster, then
    /// the kubeconfig of `plinth up` in its data dir).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// Prints the health table.
pub async fn run(args: HealthArgs) -> anyhow::Result<()> {
    let request = match args.request.as_deref() {
        None => None,
        Some(r) => Some(r.split_once('/').with_context(|| {
            format!("request {r:?}: expected NAMESPACE/NAME, e.g. default/my-request")
        })?),
    };
    let client = super::operator::platform_client(args.kubeconfig.as_deref()).await?;
    let rows =
        plinth_controllers::health::report::collect(&client, args.promise.as_deref(), request)
            .await?;
    if rows.is_empty() {
        println!("No resource requests.");
        return Ok(());
    }
    let out = plinth_controllers::health::report::render(
        &rows,
        jiff::Timestamp::now(),
        request.is_some(),
    );
    print!("{out}");
    Ok(())
}
