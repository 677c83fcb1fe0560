//! One module per subcommand.

pub mod add;
pub mod agent;
pub mod agent_manifests;
pub mod build;
pub mod diff;
pub mod gitops;
pub mod health;
pub mod image;
pub mod init;
pub mod manifests;
pub mod operator;
pub mod pipeline_adapter;
pub mod quickstart;
pub mod render;
pub mod requests;
pub mod status;
pub mod test;
pub mod up;
pub mod update;
pub mod worker;
