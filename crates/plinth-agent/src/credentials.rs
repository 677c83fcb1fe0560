//! Store credentials for the agent, with the key names of Kratix's state-store Secrets:
//! Git `username`/`password` (basicAuth), `sshPrivateKey`/`knownHosts`[/`passphrase`]
//! (ssh), `appID`/`installationID`/`privateKey`[/`apiURL`] (githubApp); buckets
//! `accessKeyID`/`secretAccessKey`.
//!
//! They come from a file (a Secret manifest with `data`/`stringData`, or a flat YAML/JSON
//! map), from the environment (`PLINTH_AGENT_<KEY>`, e.g. `PLINTH_AGENT_PASSWORD`) or from
//! a Secret in the target cluster — never from the command line. Values are never logged.

use std::collections::BTreeMap;

use plinth_statestore::{BucketAuth, GitAuth};
use serde_json::Value;

/// Credential keys by name (values are secret).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials(pub BTreeMap<String, String>);

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({:?})", self.0.keys().collect::<Vec<_>>())
    }
}

/// Why credentials could not be read or do not describe a complete method. Never holds a
/// credential value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// The file is neither YAML nor JSON.
    #[error("credentials file is not YAML or JSON: {cause}")]
    NotYaml {
        /// The parser's message.
        cause: String,
    },
    /// A key of a Secret's `data` is not a string.
    #[error("data.{key} is not a string")]
    DataNotString {
        /// The key.
        key: String,
    },
    /// A key of a Secret's `data` is not base64.
    #[error("data.{key} is not base64")]
    DataNotBase64 {
        /// The key.
        key: String,
    },
    /// A key of a Secret's `data` does not decode to UTF-8 text.
    #[error("data.{key} is not UTF-8")]
    DataNotUtf8 {
        /// The key.
        key: String,
    },
    /// A key of a Secret's `stringData` is not a string.
    #[error("stringData.{key} is not a string")]
    StringDataNotString {
        /// The key.
        key: String,
    },
    /// A key of a flat map is not a string.
    #[error("{key} is not a string")]
    NotString {
        /// The key.
        key: String,
    },
    /// The document is neither a map nor a Secret.
    #[error("credentials must be a map of strings or a Secret")]
    NotAMap,
    /// A method is half given: `key` is missing beside `given`.
    #[error("{method} credentials need {key} beside {given}")]
    MissingBeside {
        /// `ssh`, `basic` or `bucket`.
        method: &'static str,
        /// The missing key.
        key: &'static str,
        /// The key that was given.
        given: &'static str,
    },
    /// A key the method needs is missing.
    #[error("{method} credentials need {key}")]
    Missing {
        /// `githubApp`.
        method: &'static str,
        /// The missing key.
        key: &'static str,
    },
}

/// Every key the agent understands.
pub const KEYS: &[&str] = &[
    "username",
    "password",
    "sshPrivateKey",
    "knownHosts",
    "passphrase",
    "appID",
    "installationID",
    "privateKey",
    "apiURL",
    "accessKeyID",
    "secretAccessKey",
];

impl Credentials {
    /// Parses a file's content: a Secret manifest (`data` base64, `stringData` plain) or a
    /// flat map of strings.
    ///
    /// # Errors
    /// [`CredentialsError::NotYaml`] when the text does not parse, else as
    /// [`Credentials::from_secret_json`] (never a value).
    pub fn from_text(text: &str) -> Result<Credentials, CredentialsError> {
        let v: Value = serde_saphyr::from_str(text).map_err(|e| CredentialsError::NotYaml {
            cause: e.to_string(),
        })?;
        Credentials::from_secret_json(&v)
    }

    /// From a Secret object (`data`, `stringData`) or a flat map.
    ///
    /// # Errors
    /// A [`CredentialsError`] naming the key whose value is not a string, not base64 or
    /// not UTF-8, or [`CredentialsError::NotAMap`].
    pub fn from_secret_json(v: &Value) -> Result<Credentials, CredentialsError> {
        let mut out = BTreeMap::new();
        let is_secret = v.get("data").is_some() || v.get("stringData").is_some();
        if is_secret {
            if let Some(d) = v.get("data").and_then(|d| d.as_object()) {
                for (k, val) in d {
                    let key = || k.clone();
                    let s = val
                        .as_str()
                        .ok_or_else(|| CredentialsError::DataNotString { key: key() })?;
                    let bytes = base64_decode(s)
                        .ok_or_else(|| CredentialsError::DataNotBase64 { key: key() })?;
                    let s = String::from_utf8(bytes)
                        .map_err(|_| CredentialsError::DataNotUtf8 { key: key() })?;
                    out.insert(k.clone(), s);
                }
            }
            if let Some(d) = v.get("stringData").and_then(|d| d.as_object()) {
                for (k, val) in d {
                    let s = val
                        .as_str()
                        .ok_or_else(|| CredentialsError::StringDataNotString { key: k.clone() })?;
                    out.insert(k.clone(), s.to_string());
                }
            }
        } else if let Some(m) = v.as_object() {
            for (k, val) in m {
                let s = val
                    .as_str()
                    .ok_or_else(|| CredentialsError::NotString { key: k.clone() })?;
                out.insert(k.clone(), s.to_string());
            }
        } else {
            return Err(CredentialsError::NotAMap);
        }
        Ok(Credentials(out))
    }

    /// From `PLINTH_AGENT_<KEY>` variables (`PLINTH_AGENT_USERNAME`, `PLINTH_AGENT_SSHPRIVATEKEY`, ...).
    pub fn from_env() -> Credentials {
        let mut out = BTreeMap::new();
        for k in KEYS {
            if let Ok(v) = std::env::var(format!("PLINTH_AGENT_{}", k.to_uppercase())) {
                out.insert(k.to_string(), v);
            }
        }
        Credentials(out)
    }

    fn get(&self, k: &str) -> Option<String> {
        self.0.get(k).filter(|v| !v.is_empty()).cloned()
    }

    /// The Git auth these credentials describe (none when empty).
    ///
    /// # Errors
    /// [`CredentialsError::MissingBeside`] or [`CredentialsError::Missing`] naming the
    /// missing key of a half-given method.
    pub fn git_auth(&self) -> Result<GitAuth, CredentialsError> {
        if let Some(private_key) = self.get("sshPrivateKey") {
            let known_hosts = self
                .get("knownHosts")
                .ok_or(CredentialsError::MissingBeside {
                    method: "ssh",
                    key: "knownHosts",
                    given: "sshPrivateKey",
                })?;
            return Ok(GitAuth::Ssh {
                private_key,
                passphrase: self.get("passphrase"),
                known_hosts,
            });
        }
        if let Some(app_id) = self.get("appID") {
            return Ok(GitAuth::GithubApp {
                app_id,
                installation_id: self
                    .get("installationID")
                    .ok_or(CredentialsError::Missing {
                        method: "githubApp",
                        key: "installationID",
                    })?,
                private_key_pem: self.get("privateKey").ok_or(CredentialsError::Missing {
                    method: "githubApp",
                    key: "privateKey",
                })?,
                api_url: self.get("apiURL").unwrap_or_default(),
            });
        }
        match (self.get("username"), self.get("password")) {
            (Some(username), Some(password)) => Ok(GitAuth::Basic { username, password }),
            (None, None) => Ok(GitAuth::None),
            (Some(_), None) => Err(CredentialsError::MissingBeside {
                method: "basic",
                key: "password",
                given: "username",
            }),
            (None, Some(_)) => Err(CredentialsError::MissingBeside {
                method: "basic",
                key: "username",
                given: "password",
            }),
        }
    }

    /// The bucket auth these credentials describe (IAM / ambient when empty).
    ///
    /// # Errors
    /// [`CredentialsError::MissingBeside`] naming the missing key.
    pub fn bucket_auth(&self) -> Result<BucketAuth, CredentialsError> {
        match (self.get("accessKeyID"), self.get("secretAccessKey")) {
            (Some(id), Some(secret)) => Ok(BucketAuth::AccessKey { id, secret }),
            (None, None) => Ok(BucketAuth::Iam),
            (Some(_), None) => Err(CredentialsError::MissingBeside {
                method: "bucket",
                key: "secretAccessKey",
                given: "accessKeyID",
            }),
            (None, Some(_)) => Err(CredentialsError::MissingBeside {
                method: "bucket",
                key: "accessKeyID",
                given: "secretAccessKey",
            }),
        }
    }
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_manifest_and_debug_hides_values() {
        let c = Credentials::from_text(
            "apiVersion: v1\nkind: Secret\ndata:\n  username: dXNlcg==\nstringData:\n  password: hunter2\n",
        )
        .unwrap();
        assert_eq!(
            c.git_auth().unwrap(),
            GitAuth::Basic {
                username: "user".into(),
                password: "hunter2".into()
            }
        );
        assert!(!format!("{c:?}").contains("hunter2"));
        let half = Credentials::from_text("accessKeyID: a\n").unwrap();
        assert_eq!(
            half.bucket_auth().unwrap_err().to_string(),
            "bucket credentials need secretAccessKey beside accessKeyID"
        );
    }
}
