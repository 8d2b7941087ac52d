//! The two token bases and the naming rule that derives every basis-dependent name.

use std::fmt;
use std::str::FromStr;

/// Where token counts come from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum TokenCountSource {
    /// The run's tokenizer, on the client (the reference's only basis, and the default).
    #[default]
    Client,
    /// The endpoint's own `usage` (or SGLang `meta_info`) counts.
    Server,
}

impl TokenCountSource {
    /// The basis name used in keys, config and `token_count_source`.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenCountSource::Client => "client",
            TokenCountSource::Server => "server",
        }
    }

    /// The basis that is not this one.
    pub fn other(self) -> TokenCountSource {
        match self {
            TokenCountSource::Client => TokenCountSource::Server,
            TokenCountSource::Server => TokenCountSource::Client,
        }
    }
}

impl fmt::Display for TokenCountSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a basis name that is neither `client` nor `server`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown token count source {0:?}: expected client or server")]
pub struct UnknownTokenCountSource(pub String);

impl FromStr for TokenCountSource {
    type Err = UnknownTokenCountSource;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "client" => Ok(TokenCountSource::Client),
            "server" => Ok(TokenCountSource::Server),
            other => Err(UnknownTokenCountSource(other.to_string())),
        }
    }
}

/// Keys that mean the same thing under either basis and are never suffixed (SPEC §4.3).
pub const NEVER_SUFFIXED: [&str; 8] = [
    "osl_paired",
    "n_samples_missing_usage",
    "n_samples_missing_usage_empty_output",
    "n_missing_usage",
    "n_undecodable",
    "n_missing",
    "client_token_tasks_pending",
    "token_count_source",
];

fn is_never_suffixed(base: &str) -> bool {
    base.starts_with("osl_paired_") || NEVER_SUFFIXED.contains(&base)
}

/// The naming rule: the name of `base` on `basis` when `primary` is the headline basis.
///
/// The primary basis keeps the base name; the other basis appends `_<basis>` (a pure
/// append: `tpot_ns` → `tpot_ns_server`, `tpot` → `tpot_server`, and under a server
/// primary `isl` → `isl_client`). Basis-independent keys never take a suffix.
pub fn basis_key(base: &str, basis: TokenCountSource, primary: TokenCountSource) -> String {
    if basis == primary || is_never_suffixed(base) {
        return base.to_string();
    }
    let mut key = String::with_capacity(base.len() + 7);
    key.push_str(base);
    key.push('_');
    key.push_str(basis.as_str());
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use TokenCountSource::{Client, Server};

    #[test]
    fn naming_rule_under_both_primaries() {
        // (base, basis, primary, expected)
        let cases = [
            ("isl", Client, Client, "isl"),
            ("isl", Server, Client, "isl_server"),
            ("osl", Server, Client, "osl_server"),
            ("tpot_ns", Server, Client, "tpot_ns_server"),
            ("tpot", Server, Client, "tpot_server"),
            ("tps", Server, Client, "tps_server"),
            ("input_sequence_lengths", Server, Client, "input_sequence_lengths_server"),
            ("output_sequence_lengths", Server, Client, "output_sequence_lengths_server"),
            ("isl", Server, Server, "isl"),
            ("isl", Client, Server, "isl_client"),
            ("tpot_ns", Client, Server, "tpot_ns_client"),
            ("tps", Client, Server, "tps_client"),
            ("n_errors", Client, Client, "n_errors"),
            ("n_errors", Client, Server, "n_errors_client"),
        ];
        for (base, basis, primary, expected) in cases {
            assert_eq!(basis_key(base, basis, primary), expected, "{base} {basis} {primary}");
        }
    }

    #[test]
    fn never_suffixed_keys_stay_as_they_are() {
        let extra = ["osl_paired_count", "osl_paired_sum_client", "osl_paired_diff_total"];
        for base in NEVER_SUFFIXED.iter().copied().chain(extra) {
            for basis in [Client, Server] {
                for primary in [Client, Server] {
                    assert_eq!(basis_key(base, basis, primary), base);
                }
            }
        }
    }

    #[test]
    fn parses_and_prints_basis_names() {
        assert_eq!("client".parse::<TokenCountSource>(), Ok(Client));
        assert_eq!("server".parse::<TokenCountSource>(), Ok(Server));
        let err = "Server".parse::<TokenCountSource>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown token count source \"Server\": expected client or server"
        );
        assert_eq!(Server.to_string(), "server");
        assert_eq!(Client.other(), Server);
        assert_eq!(TokenCountSource::default(), Client);
    }
}
