//! Promise authoring: scaffolding a Promise directory in kratix-cli's layout
//! ([`scaffold`], [`api`], [`deps`], [`container`], [`layout`]), rendering a workflow
//! locally ([`render`]), Promise test cases ([`testing`]) and the preview of a Promise
//! update against a running platform ([`preview`]). The `plinth init/update/add/build/
//! render/test/diff` commands are thin layers over these.

pub mod api;
pub mod container;
pub mod deps;
pub mod layout;
pub mod preview;
pub mod render;
pub mod scaffold;
pub mod testing;
pub mod yaml;
