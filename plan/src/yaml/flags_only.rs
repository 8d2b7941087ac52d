//! The settings given by flags only: the reference's schema has no keys for them, so YAML
//! never sets them and config.yaml never shows them. They are part of `Config` all the same,
//! so the plan reads every setting from one value.

/// `--mode` (the reference's `TestMode`): `perf` and `both` run the performance phase and
/// every accuracy dataset; `acc` (`--accuracy-only`) runs the accuracy datasets alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TestMode {
    #[default]
    Perf,
    Acc,
    Both,
}

impl TestMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TestMode::Perf => "perf",
            TestMode::Acc => "acc",
            TestMode::Both => "both",
        }
    }
}

/// The shard settings as given (flags only: the reference's schema has no such keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardArgs {
    /// `--shard I/N`.
    pub shard: Option<String>,
    /// `--shards N` (the count a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` needs).
    pub shards: Option<u64>,
    /// `--start-at TIME`: RFC 3339 or Unix seconds.
    pub start_at: Option<String>,
}
