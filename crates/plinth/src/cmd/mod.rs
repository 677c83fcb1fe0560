//! One module per subcommand.

pub mod agent;
pub mod agent_manifests;
pub mod gitops;
pub mod health;
pub mod manifests;
pub mod operator;
pub mod pipeline_adapter;
pub mod quickstart;
pub mod status;
pub mod up;
pub mod worker;
