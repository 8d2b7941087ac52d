//! Server profiling (`settings.profiling`): the engine whose profiler a run triggers and the
//! URLs its start and stop calls go to, derived as the reference derives them.

use crate::error::AppError;
use crate::yaml::Config;

/// An inference engine whose profiling protocol a run drives. The reference registers vLLM
/// only (`ProfilerEngine`); another engine is refused by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfilerEngine {
    Vllm,
}

impl ProfilerEngine {
    /// The name the configuration, report.txt and profiling.json use.
    pub fn as_str(self) -> &'static str {
        match self {
            ProfilerEngine::Vllm => "vllm",
        }
    }

    /// The engine's start and stop paths (the reference's `_PROFILE_PATHS`).
    pub fn paths(self) -> (&'static str, &'static str) {
        match self {
            ProfilerEngine::Vllm => ("/start_profile", "/stop_profile"),
        }
    }

    fn parse(name: &str) -> Result<ProfilerEngine, AppError> {
        match name {
            "vllm" => Ok(ProfilerEngine::Vllm),
            other => Err(AppError::Input(format!(
                "settings.profiling.engine (--profile, --engine) {other:?} is not an engine the \
                 reference profiles; give vllm or leave it out"
            ))),
        }
    }
}

/// A run's profiling: the engine and the URLs its triggers are derived from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfilingPlan {
    pub engine: ProfilerEngine,
    /// `settings.profiling.urls` when given (and not empty), else the endpoints as written;
    /// empty = the embedded stub's URL, known once it started.
    pub bases: Vec<String>,
}

impl ProfilingPlan {
    /// The start and stop URLs, one of each per base (`embedded_url` when there is none).
    pub fn urls(&self, embedded_url: &str) -> (Vec<String>, Vec<String>) {
        let bases: Vec<String> =
            if self.bases.is_empty() { vec![embedded_url.to_string()] } else { self.bases.clone() };
        let (start, stop) = self.engine.paths();
        (derive_urls(&bases, start), derive_urls(&bases, stop))
    }
}

/// One profile URL per base: a trailing `/` and then a trailing `/v1` stripped, `path`
/// appended (the reference's `_derive_profile_urls`).
pub fn derive_urls(bases: &[String], path: &str) -> Vec<String> {
    bases
        .iter()
        .map(|base| {
            let base = base.trim_end_matches('/');
            let base = base.strip_suffix("/v1").unwrap_or(base);
            format!("{}{path}", base.trim_end_matches('/'))
        })
        .collect()
}

/// Checks `settings.profiling` as the reference's schema does (the engine is one it
/// registers, each URL has a scheme), whether or not an engine is set.
pub fn check_profiling(config: &Config) -> Result<(), AppError> {
    let p = &config.settings.profiling;
    if let Some(engine) = &p.engine {
        ProfilerEngine::parse(engine)?;
    }
    for url in p.urls.iter().flatten() {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(AppError::Input(format!(
                "settings.profiling.urls (--profile-urls, --urls) {url:?} has no scheme; give \
                 http:// or https://"
            )));
        }
    }
    Ok(())
}

/// The run's profiling, `None` when no engine is set (the URLs alone do nothing, as in the
/// reference). The null endpoint has no server to profile: it needs URLs of its own.
pub(super) fn resolve_profiling(config: &Config) -> Result<Option<ProfilingPlan>, AppError> {
    check_profiling(config)?;
    let p = &config.settings.profiling;
    let Some(engine) = &p.engine else { return Ok(None) };
    let engine = ProfilerEngine::parse(engine)?;
    // As the reference's `urls_override or endpoints`: an empty list falls through.
    let bases: Vec<String> = match &p.urls {
        Some(urls) if !urls.is_empty() => urls.clone(),
        _ => config.endpoint_config.endpoints.iter().map(|e| e.trim().to_string()).collect(),
    };
    let null = super::endpoints::NULL_ENDPOINT;
    if bases.iter().any(|b| b == null) {
        return Err(AppError::Input(format!(
            "settings.profiling.engine {}: endpoint {null} has no server to profile; give \
             --profile-urls or leave --profile out",
            engine.as_str(),
        )));
    }
    Ok(Some(ProfilingPlan { engine, bases }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_derived_as_the_reference_derives_them() {
        let cases = [
            ("http://h:8000/v1", "http://h:8000/start_profile"),
            ("http://h:8000/v1/", "http://h:8000/start_profile"),
            ("http://h:8000", "http://h:8000/start_profile"),
            ("http://h:8000/", "http://h:8000/start_profile"),
            ("https://h/api/v1", "https://h/api/start_profile"),
        ];
        for (base, want) in cases {
            assert_eq!(derive_urls(&[base.to_string()], "/start_profile"), [want], "{base}");
        }
        let plan = ProfilingPlan {
            engine: ProfilerEngine::Vllm,
            bases: vec!["http://a/v1".into(), "http://b/v1".into()],
        };
        let (start, stop) = plan.urls("unused");
        assert_eq!(start, ["http://a/start_profile", "http://b/start_profile"]);
        assert_eq!(stop, ["http://a/stop_profile", "http://b/stop_profile"]);
        let embedded = ProfilingPlan { engine: ProfilerEngine::Vllm, bases: Vec::new() };
        assert_eq!(embedded.urls("http://127.0.0.1:5").0, ["http://127.0.0.1:5/start_profile"]);
    }

    fn resolve(yaml: &str) -> Result<Option<ProfilingPlan>, AppError> {
        resolve_profiling(&Config::from_yaml_str(yaml, "t.yaml").expect("yaml"))
    }

    #[test]
    fn the_settings_resolve_to_one_plan_and_bad_values_are_named() {
        let base = "type: offline\nendpoint_config: {endpoints: ['http://e:1/v1']}\n";
        assert_eq!(resolve(base).unwrap(), None);
        let urls_alone = format!("{base}settings: {{profiling: {{urls: ['http://p:2']}}}}\n");
        assert_eq!(resolve(&urls_alone).unwrap(), None, "urls without an engine do nothing");
        let vllm = format!("{base}settings: {{profiling: {{engine: vllm}}}}\n");
        let want =
            ProfilingPlan { engine: ProfilerEngine::Vllm, bases: vec!["http://e:1/v1".into()] };
        assert_eq!(resolve(&vllm).unwrap(), Some(want));
        let empty = format!("{base}settings: {{profiling: {{engine: vllm, urls: []}}}}\n");
        assert_eq!(resolve(&empty).unwrap().unwrap().bases, ["http://e:1/v1"]);
        let given =
            format!("{base}settings: {{profiling: {{engine: vllm, urls: ['http://p:2']}}}}\n");
        assert_eq!(resolve(&given).unwrap().unwrap().bases, ["http://p:2"]);
        let bad = [
            ("settings: {profiling: {engine: sglang}}", "\"sglang\" is not an engine"),
            ("settings: {profiling: {engine: vllm, urls: ['p:2']}}", "\"p:2\" has no scheme"),
            ("settings: {profiling: {urls: ['p:2']}}", "\"p:2\" has no scheme"),
        ];
        for (settings, want) in bad {
            let err = resolve(&format!("{base}{settings}\n")).unwrap_err();
            assert!(err.to_string().contains(want), "{settings}: {err}");
            assert_eq!(err.exit_code(), 2);
        }
        let null = "type: offline\nendpoint_config: {endpoints: ['null://']}\n\
                    settings: {profiling: {engine: vllm}}\n";
        assert!(resolve(null).unwrap_err().to_string().contains("null:// has no server"));
    }
}
