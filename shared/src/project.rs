//! The project a request acts for and the kind of key it came with. A project has a secret API
//! key (`Api-Key` header, everything), a publishable SDK key (shipped inside apps: only ingest and
//! user create/update) and a v2 access token (`Authorization: Bearer`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    Secret,
    Publishable,
    Access,
}

impl KeyKind {
    /// The visible prefix of a generated key, so a leaked key says what it is.
    pub fn prefix(self) -> &'static str {
        match self {
            KeyKind::Secret => "wm_sk_",
            KeyKind::Publishable => "wm_pk_",
            KeyKind::Access => "wm_at_",
        }
    }
}

/// The project a request acts for, resolved from its key. Every storage key is built from
/// `project_id` taken from here, never from request input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Project {
    pub project_id: String,
    pub account_id: String,
    pub kind: KeyKind,
}
