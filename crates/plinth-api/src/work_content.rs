//! The encoding of a Work's workload `content`, as Kratix writes it: the file's bytes
//! gzip-compressed, then standard base64.
//!
//! ```
//! use plinth_api::work_content;
//!
//! let content = work_content::encode(b"kind: ConfigMap\n");
//! assert_eq!(work_content::decode(&content).unwrap(), b"kind: ConfigMap\n");
//! assert!(work_content::decode("not base64!").is_err());
//! ```

use std::io::{Read as _, Write as _};

use base64::Engine as _;

/// Why a workload's `content` cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    /// The text is not standard base64.
    #[error("content is not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    /// The bytes are not a gzip stream.
    #[error("content is not gzip: {0}")]
    Gzip(#[from] std::io::Error),
}

/// `bytes` as a workload's `content`.
pub fn encode(bytes: &[u8]) -> String {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).expect("writing to a Vec cannot fail");
    base64::engine::general_purpose::STANDARD
        .encode(gz.finish().expect("finishing a Vec cannot fail"))
}

/// The file bytes a workload's `content` holds (surrounding whitespace ignored).
///
/// # Errors
/// [`ContentError`]: not base64, or not gzip.
pub fn decode(content: &str) -> Result<Vec<u8>, ContentError> {
    let compressed = base64::engine::general_purpose::STANDARD.decode(content.trim())?;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(compressed.as_slice()).read_to_end(&mut out)?;
    Ok(out)
}
