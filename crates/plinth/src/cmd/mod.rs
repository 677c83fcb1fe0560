//! One module per subcommand.

pub mod health;
pub mod manifests;
pub mod operator;
pub mod pipeline_adapter;
pub mod quickstart;
pub mod up;
