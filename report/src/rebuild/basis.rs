//! Which token basis a post-run tool reports under: the flag, else the run's summary, else
//! its config.yaml, else client (said on stderr), as SPEC §4.11 orders them.

use loadgen_coordinator::metrics::TokenCountSource;

use crate::ResultSummary;

/// Where the basis came from, for the note on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BasisOrigin {
    Flag,
    Summary,
    Config,
    Default,
}

/// The basis and where it came from. `summary` is the run's result_summary.json (if read; an
/// unknown `token_count_source` there is refused as it is read), `config` the run's
/// config.yaml as YAML (if read).
pub fn resolve_basis(
    flag: Option<TokenCountSource>,
    summary: Option<&ResultSummary>,
    config: Option<&serde_yaml_ng::Value>,
) -> Result<(TokenCountSource, BasisOrigin), String> {
    if let Some(basis) = flag {
        return Ok((basis, BasisOrigin::Flag));
    }
    // A summary the reference wrote has no `token_count_source`.
    if let Some(summary) = summary.filter(|s| !s.reference_only) {
        return Ok((summary.primary.basis, BasisOrigin::Summary));
    }
    let from_config =
        config.and_then(|c| c.get("settings")).and_then(|s| s.get("token_count_source"));
    if let Some(value) = from_config {
        let text = value.as_str().unwrap_or_default();
        let basis = text.parse().map_err(|_| {
            format!(
                "config.yaml has settings.token_count_source {text:?}, neither client nor \
                 server; pass --token-count-source client|server"
            )
        })?;
        return Ok((basis, BasisOrigin::Config));
    }
    Ok((TokenCountSource::Client, BasisOrigin::Default))
}

/// The stderr note for a basis that was not given or recorded.
pub fn default_note(origin: BasisOrigin) -> Option<&'static str> {
    (origin == BasisOrigin::Default).then_some(
        "note: neither result_summary.json nor config.yaml names the run's token basis \
         (settings.token_count_source); reporting under client, the default \
         (--token-count-source server rebuilds under the server's usage)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use TokenCountSource::{Client, Server};

    fn yaml(text: &str) -> serde_yaml_ng::Value {
        serde_yaml_ng::from_str(text).unwrap()
    }

    fn summary(json: serde_json::Value) -> Result<ResultSummary, serde_json::Error> {
        serde_json::from_value(json)
    }

    #[test]
    fn the_basis_resolves_flag_then_summary_then_config_then_client() {
        let summary = summary(serde_json::json!({"token_count_source": "server"})).unwrap();
        let config = yaml("settings:\n  token_count_source: server\n");
        let empty = yaml("settings: {}\n");
        let s = Some(&summary);
        assert_eq!(resolve_basis(Some(Client), s, Some(&config)), Ok((Client, BasisOrigin::Flag)));
        assert_eq!(resolve_basis(None, s, Some(&empty)), Ok((Server, BasisOrigin::Summary)));
        assert_eq!(resolve_basis(None, None, Some(&config)), Ok((Server, BasisOrigin::Config)));
        assert_eq!(resolve_basis(None, None, Some(&empty)), Ok((Client, BasisOrigin::Default)));
        assert_eq!(resolve_basis(None, None, None), Ok((Client, BasisOrigin::Default)));
        assert!(default_note(BasisOrigin::Default).is_some());
        assert!(default_note(BasisOrigin::Summary).is_none());
    }

    #[test]
    fn an_unknown_recorded_basis_is_refused_by_name() {
        let err = summary(serde_json::json!({"token_count_source": "both"})).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("\"both\"") && err.contains("--token-count-source"), "{err}");
        // A summary the reference wrote names no basis: config.yaml's, else client.
        let reference = summary(serde_json::json!({"version": "5.0.0"})).unwrap();
        let got = resolve_basis(None, Some(&reference), None);
        assert_eq!(got, Ok((Client, BasisOrigin::Default)));
    }
}
