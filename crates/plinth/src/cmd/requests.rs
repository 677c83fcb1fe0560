//! The arguments `plinth status` and `plinth health` share: which resource requests to
//! show, and the platform to read them from.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

/// `[PROMISE [NAMESPACE/NAME]] [--kubeconfig PATH]`.
#[derive(Args, Debug)]
pub struct RequestsArgs {
    /// Only this Promise's requests.
    pub promise: Option<String>,
    /// Only this request, as NAMESPACE/NAME (needs PROMISE).
    pub request: Option<String>,
    /// Kubeconfig of the platform (default: KUBECONFIG, ~/.kube/config, in-cluster, then
    /// the kubeconfig of `plinth up` in its data dir).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

impl RequestsArgs {
    /// The request asked for, as (namespace, name).
    ///
    /// # Errors
    /// It is not written NAMESPACE/NAME.
    pub fn request(&self) -> anyhow::Result<Option<(&str, &str)>> {
        self.request
            .as_deref()
            .map(|r| {
                r.split_once('/').with_context(|| {
                    format!("request {r:?}: expected NAMESPACE/NAME, e.g. default/my-request")
                })
            })
            .transpose()
    }

    /// A client of the platform.
    ///
    /// # Errors
    /// No kubeconfig could be found or read.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        super::operator::platform_client(self.kubeconfig.as_deref()).await
    }
}
