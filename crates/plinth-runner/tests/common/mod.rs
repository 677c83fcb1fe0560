//! Shared helpers of the runner's integration tests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, ContainerStatus, Pod, PodStatus, Secret};
use plinth_runner::RunnerError;
use plinth_runner::access::ClusterAccess;

/// Fixed objects standing in for the API (executor tests that need no API server).
#[derive(Default)]
pub struct FakeAccess {
    pub config_maps: HashMap<(String, String), ConfigMap>,
    pub secrets: HashMap<(String, String), Secret>,
    pub token: String,
}

impl FakeAccess {
    pub fn with_config_map(mut self, ns: &str, cm: serde_json::Value) -> Self {
        let cm: ConfigMap = serde_json::from_value(cm).unwrap();
        self.config_maps
            .insert((ns.into(), cm.metadata.name.clone().unwrap()), cm);
        self
    }
    pub fn with_secret(mut self, ns: &str, s: serde_json::Value) -> Self {
        let s: Secret = serde_json::from_value(s).unwrap();
        self.secrets
            .insert((ns.into(), s.metadata.name.clone().unwrap()), s);
        self
    }
}

impl ClusterAccess for FakeAccess {
    async fn config_map(&self, ns: &str, name: &str) -> Result<Option<ConfigMap>, RunnerError> {
        Ok(self.config_maps.get(&(ns.into(), name.into())).cloned())
    }
    async fn secret(&self, ns: &str, name: &str) -> Result<Option<Secret>, RunnerError> {
        Ok(self.secrets.get(&(ns.into(), name.into())).cloned())
    }
    async fn service_account_token(
        &self,
        ns: &str,
        sa: &str,
        _pod: &Pod,
        _audiences: Vec<String>,
        _expiration_seconds: i64,
    ) -> Result<String, RunnerError> {
        Ok(format!("{}:{ns}:{sa}", self.token))
    }
}

/// Whether bubblewrap is available; prints a SKIPPED line when not.
pub fn have_bwrap(test: &str) -> bool {
    if plinth_runner::config::find_on_path("bwrap").is_some() {
        true
    } else {
        println!(
            "SKIPPED: {test}: bwrap is not installed (scripts/install-test-deps.sh installs bubblewrap)"
        );
        false
    }
}

/// Writes an executable script at `path` (its directory created), e.g. a stand-in for the
/// `plinth` executable or an image-map command.
pub fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub fn pod(v: serde_json::Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

pub fn container<'a>(status: &'a PodStatus, init: bool, name: &str) -> &'a ContainerStatus {
    let list = if init {
        status.init_container_statuses.as_ref().unwrap()
    } else {
        status.container_statuses.as_ref().unwrap()
    };
    list.iter().find(|c| c.name == name).unwrap()
}

pub fn exit_code(c: &ContainerStatus) -> i32 {
    c.state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap()
        .exit_code
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}
