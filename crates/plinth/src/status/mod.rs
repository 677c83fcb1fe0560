//! The status of the platform as one tree per Promise: [`tree`] builds it from listed
//! objects, [`collect`] lists (and watches) them through the API, [`text`] prints it.
//! Used by `plinth status` and the web view.

pub mod collect;
pub mod text;
pub mod tree;
