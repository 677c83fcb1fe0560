//! What the server knows about one served resource (a built-in kind or one version of a
//! CRD), and the field-level error causes admission returns.
//!
//! Shared by storage/routing (which resources exist, how they are scoped), discovery,
//! OpenAPI publishing, schema admission and Table rendering.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One served resource at one group/version, e.g. `apps/v1 deployments` or
/// `test.kratix.io/v1alpha1 testbundles`. Source: Kubernetes `APIResource` discovery
/// fields plus what admission and Tables need from a CRD version.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ResourceInfo {
    /// API group; empty for the core group (`/api/v1`).
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// List kind, normally `<Kind>List`.
    pub list_kind: String,
    /// Plural resource name used in URLs, e.g. `configmaps`.
    pub plural: String,
    /// Singular name, lower case.
    pub singular: String,
    /// True for namespaced resources.
    pub namespaced: bool,
    /// `kubectl` short names, e.g. `["cm"]`.
    pub short_names: Vec<String>,
    /// Categories, e.g. `["all"]` or `["kratix"]`.
    pub categories: Vec<String>,
    /// Verbs served for the main resource (`get`, `list`, `watch`, `create`, ...).
    pub verbs: Vec<String>,
    /// True when the resource has a `/status` subresource (spec and status written separately).
    pub status_subresource: bool,
    /// True for built-in kinds: strategic merge patch is accepted for them (as on Kubernetes),
    /// and rejected with 415 for custom resources.
    pub builtin: bool,
    /// The OpenAPI v3 schema of an object of this kind (a CRD version's
    /// `schema.openAPIV3Schema`, or the built-in schema); `None` accepts anything.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns` of a CRD version (for Tables); empty for built-ins,
    /// whose columns are fixed by the Table renderer.
    pub printer_columns: Vec<PrinterColumn>,
    /// True when this is the CRD's storage version (one per CRD); always true for built-ins.
    pub storage: bool,
}

impl ResourceInfo {
    /// `group/version`, or just `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// One CRD `additionalPrinterColumns` entry (apiextensions.k8s.io/v1).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PrinterColumn {
    /// Column header, e.g. `STATUS` (kubectl upper-cases it).
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    #[serde(rename = "type")]
    pub type_: String,
    /// OpenAPI format hint for the value (e.g. `date-time`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Human-readable description of the column (shown by `kubectl explain`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// 0 shows the column in the default table; above 0 only with `-o wide`.
    #[serde(default)]
    pub priority: i32,
    /// A simple JSONPath relative to the object, e.g. `.status.conditions[?(@.type=="Ready")].status`.
    pub json_path: String,
}

/// One field-level cause of a 422 `Invalid` answer, as in Kubernetes `StatusCause`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Cause {
    /// Machine reason: `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`,
    /// `FieldValueTypeInvalid`, `FieldValueDuplicate`, `FieldValueTooLong`, `FieldValueForbidden`.
    pub reason: String,
    /// Human message, e.g. `Invalid value: "abc": spec.replicas in body must be of type integer`.
    pub message: String,
    /// Field path in Kubernetes form, e.g. `spec.containers[0].image`.
    pub field: String,
}
