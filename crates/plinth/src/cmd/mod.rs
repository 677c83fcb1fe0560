//! One module per subcommand.

pub mod agent;
pub mod manifests;
pub mod operator;
pub mod pipeline_adapter;
pub mod quickstart;
pub mod up;
