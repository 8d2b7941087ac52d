//! The benchmark rulesets a submission names (`submission_ref.ruleset`), as data: the MLPerf
//! rounds the reference registers, their pinned seeds, and per model the scenarios it may run
//! in (an optimization priority), each with its minimum duration, sample count and latency
//! caps, and the model's golden accuracy with the factors that make its targets.

/// How a round optimizes a model's run: the reference's `OptimizationPriority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Throughput,
    LowLatencyInteractive,
    EdgeSingleStream,
}

impl Priority {
    /// The reference's description of the priority.
    pub fn describe(self) -> &'static str {
        match self {
            Priority::Throughput => "Moderate 99% percentile latency, max throughput",
            Priority::LowLatencyInteractive => {
                "Strict latency constraint for Interactive sessions, TPOT > TTFT > throughput"
            }
            Priority::EdgeSingleStream => {
                "Single-stream edge serving (one in-flight request, -np 1), reasoning off"
            }
        }
    }
}

/// A metric a ruleset targets or reports (the reference's `metrics` classes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Throughput,
    Ttft,
    Tpot,
}

/// One model's rules in one scenario (the reference's `PerModelRuleset` and its
/// `TokenBasedRuleset` subclass, which adds the TTFT and TPOT caps).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScenarioRules {
    pub priority: Priority,
    /// Minimum duration of a valid run, ms.
    pub min_duration_ms: u64,
    /// A run's time-out, ms; `None` = none.
    pub max_duration_ms: Option<u64>,
    /// Samples a valid run sends at least; `None` = no minimum.
    pub min_sample_count: Option<u64>,
    pub metric: Option<Metric>,
    pub reported: &'static [Metric],
    /// TTFT and TPOT caps of a token-based ruleset, ms.
    pub max_ttft_ms: Option<u64>,
    pub max_tpot_ms: Option<u64>,
}

/// A benchmark dataset a model is measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchmarkDataset {
    pub description: &'static str,
    /// Unique samples in the dataset.
    pub size: u64,
    pub max_seq_len: Option<u64>,
}

/// A benchmark model: its golden accuracy (at `golden_precision`), the accuracy settings it
/// may run in (per metric, a lower factor and an optional upper one on the golden value), and
/// its dataset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    pub name: &'static str,
    pub golden_precision: &'static str,
    pub golden: &'static [(&'static str, f64)],
    pub target_settings: &'static [&'static [(&'static str, f64, Option<f64>)]],
    pub dataset: BenchmarkDataset,
}

impl Model {
    /// The golden value of `metric`.
    pub fn golden(&self, metric: &str) -> Option<f64> {
        self.golden.iter().find(|(m, _)| *m == metric).map(|&(_, v)| v)
    }
}

/// One registered ruleset (the reference's `RoundRuleset`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ruleset {
    pub version: &'static str,
    /// `settings.runtime.scheduler_random_seed` of a submission.
    pub scheduler_rng_seed: u64,
    /// `settings.runtime.dataloader_random_seed` and `settings.warmup.warmup_random_seed`.
    pub sample_index_rng_seed: u64,
    pub models: &'static [(&'static Model, &'static [ScenarioRules])],
}

impl Ruleset {
    /// The model named `name` and its scenarios.
    pub fn model(&self, name: &str) -> Option<(&'static Model, &'static [ScenarioRules])> {
        self.models.iter().find(|(m, _)| m.name == name).copied()
    }

    /// The reference's words when `name` is not one of the round's models.
    pub fn model_error(&self, name: &str) -> String {
        format!("Model {name} not found in rules for round {}", self.version)
    }
}

const TEN_MINUTES_MS: u64 = 10 * 60 * 1000;
/// The reference's default minimum query count of a per-query or token-based ruleset.
const MIN_QUERIES: u64 = 270_336;

const fn token_based(priority: Priority, ttft: u64, tpot: u64) -> ScenarioRules {
    ScenarioRules {
        priority,
        min_duration_ms: TEN_MINUTES_MS,
        max_duration_ms: None,
        min_sample_count: Some(MIN_QUERIES),
        metric: Some(Metric::Throughput),
        reported: &[Metric::Throughput, Metric::Ttft, Metric::Tpot],
        max_ttft_ms: Some(ttft),
        max_tpot_ms: Some(tpot),
    }
}

use Priority::{EdgeSingleStream, LowLatencyInteractive, Throughput};

pub static DEEPSEEK_R1: Model = Model {
    name: "deepseek-r1",
    golden_precision: "fp32",
    golden: &[("exact_match", 81.3582), ("TOKENS_PER_SAMPLE", 3886.2274)],
    target_settings: &[&[("exact_match", 0.99, None), ("TOKENS_PER_SAMPLE", 0.9, Some(1.1))]],
    dataset: BenchmarkDataset {
        description: "Custom dataset curated by MLCommons for DeepSeek R1, specifically for \
                      the MLPerf Inference benchmark",
        size: 4388,
        max_seq_len: None,
    },
};

pub static LLAMA3_1_8B: Model = Model {
    name: "llama3-1-8b",
    golden_precision: "fp32",
    golden: &[
        ("ROUGE1", 38.7792),
        ("ROUGE2", 15.9075),
        ("ROUGEL", 24.4957),
        ("ROUGELSUM", 35.793),
        ("GEN_LEN", 8_167_644.0),
    ],
    target_settings: &[&[
        ("ROUGE1", 0.99, None),
        ("ROUGE2", 0.99, None),
        ("ROUGEL", 0.99, None),
        ("ROUGELSUM", 0.99, None),
        ("GEN_LEN", 0.9, Some(1.1)),
    ]],
    dataset: BenchmarkDataset {
        description: "CNNDailyMail v3.0.0",
        size: 13368,
        max_seq_len: Some(2048),
    },
};

pub static LLAMA2_70B: Model = Model {
    name: "llama2-70b",
    golden_precision: "fp32",
    golden: &[
        ("ROUGE1", 44.4312),
        ("ROUGE2", 22.0352),
        ("ROUGEL", 28.6162),
        ("TOKENS_PER_SAMPLE", 294.45),
    ],
    target_settings: &[
        &[
            ("ROUGE1", 0.99, None),
            ("ROUGE2", 0.99, None),
            ("ROUGEL", 0.99, None),
            ("TOKENS_PER_SAMPLE", 0.9, Some(1.1)),
        ],
        &[
            ("ROUGE1", 0.999, None),
            ("ROUGE2", 0.999, None),
            ("ROUGEL", 0.999, None),
            ("TOKENS_PER_SAMPLE", 0.9, Some(1.1)),
        ],
    ],
    dataset: BenchmarkDataset { description: "OpenOrca", size: 24576, max_seq_len: Some(1024) },
};

pub static LLAMA3_1_405B: Model = Model {
    name: "llama3.1-405b",
    golden_precision: "fp32",
    golden: &[("ROUGEL", 21.6666), ("exact_match", 90.1335), ("TOKENS_PER_SAMPLE", 684.68)],
    target_settings: &[&[
        ("ROUGEL", 0.99, None),
        ("exact_match", 0.99, None),
        ("TOKENS_PER_SAMPLE", 0.9, Some(1.1)),
    ]],
    dataset: BenchmarkDataset {
        description: "Subset of LongBench, LongDataCollections, Ruler, GovReport",
        size: 8313,
        max_seq_len: None,
    },
};

pub static MIXTRAL_8X7B: Model = Model {
    name: "mixtral-8x7b",
    golden_precision: "fp32",
    golden: &[
        ("ROUGE1", 45.5989),
        ("ROUGE2", 23.3526),
        ("ROUGEL", 30.4608),
        ("TOKENS_PER_SAMPLE", 144.84),
        ("gsm8k_accuracy", 73.66),
        ("mbxp_accuracy", 60.16),
    ],
    target_settings: &[&[
        ("ROUGE1", 0.99, None),
        ("ROUGE2", 0.99, None),
        ("ROUGEL", 0.99, None),
        ("TOKENS_PER_SAMPLE", 0.9, Some(1.1)),
        ("gsm8k_accuracy", 0.99, None),
        ("mbxp_accuracy", 0.99, None),
    ]],
    dataset: BenchmarkDataset {
        description: "Subset of OpenOrca (5k samples), GSM8K (5k samples from train split), \
                      MBXP (5k samples) for QA, Math, and Code Generation",
        size: 15000,
        max_seq_len: Some(2048),
    },
};

/// The edge-agentic reference model; its golden values are the Q4_K_M reference point.
pub static QWEN3_6_27B: Model = Model {
    name: "qwen3.6-27b",
    golden_precision: "q4_k_m-reference",
    golden: &[("bfcl_overall_accuracy", 86.23), ("bfcl_normalized_accuracy", 87.96)],
    target_settings: &[&[
        ("bfcl_overall_accuracy", 0.97, None),
        ("bfcl_normalized_accuracy", 0.97, None),
    ]],
    dataset: BenchmarkDataset {
        description: "BFCL v4 single-turn function-calling accuracy set (non_live, live, \
                      hallucination), per-category sampled to a stable ~995-sample point \
                      estimate. This is the gated accuracy workload for the Edge-Agentic \
                      benchmark.",
        size: 995,
        max_seq_len: Some(32768),
    },
};

/// The datacenter rounds' models and scenarios (v6.1 keeps v5.1's; only the seeds rotate).
static DATACENTER: &[(&Model, &[ScenarioRules])] = &[
    (&DEEPSEEK_R1, &[token_based(Throughput, 2000, 80)]),
    (
        &LLAMA3_1_8B,
        &[token_based(Throughput, 2000, 100), token_based(LowLatencyInteractive, 500, 30)],
    ),
    (
        &LLAMA2_70B,
        &[token_based(Throughput, 2000, 200), token_based(LowLatencyInteractive, 450, 40)],
    ),
    (
        &LLAMA3_1_405B,
        &[token_based(Throughput, 6000, 175), token_based(LowLatencyInteractive, 4500, 80)],
    ),
    (&MIXTRAL_8X7B, &[token_based(Throughput, 2000, 200)]),
];

pub static V5_1: Ruleset = Ruleset {
    version: "v5.1",
    scheduler_rng_seed: 18_209_322_760_996_052_031,
    sample_index_rng_seed: 14_771_362_308_971_278_857,
    models: DATACENTER,
};

pub static V6_1: Ruleset = Ruleset {
    version: "v6.1",
    scheduler_rng_seed: 16_159_082_839_903_944_936,
    sample_index_rng_seed: 2_747_215_439_041_700_203,
    models: DATACENTER,
};

pub static EDGE_V0_1: Ruleset = Ruleset {
    version: "edge-v0.1",
    scheduler_rng_seed: 42,
    sample_index_rng_seed: 42,
    models: &[(
        &QWEN3_6_27B,
        &[ScenarioRules {
            priority: EdgeSingleStream,
            min_duration_ms: 0,
            max_duration_ms: Some(4 * 60 * 60 * 1000),
            min_sample_count: Some(995),
            metric: Some(Metric::Throughput),
            reported: &[Metric::Throughput],
            max_ttft_ms: None,
            max_tpot_ms: None,
        }],
    )],
};

/// The registry, in the reference's order: each round by version, then the current round,
/// the edge round by version and the current edge round.
pub static RULESETS: &[(&str, &Ruleset)] = &[
    ("mlperf-inference-v5.1", &V5_1),
    ("mlperf-inference-v6.1", &V6_1),
    ("mlcommons-current", &V6_1),
    ("mlperf-edge-v0.1", &EDGE_V0_1),
    ("mlperf-edge-current", &EDGE_V0_1),
];

/// The ruleset registered as `name`, else the reference's words naming the registered ones.
pub fn ruleset(name: &str) -> Result<&'static Ruleset, String> {
    RULESETS.iter().find(|(n, _)| *n == name).map(|&(_, r)| r).ok_or_else(|| {
        let names: Vec<String> = RULESETS.iter().map(|(n, _)| format!("'{n}'")).collect();
        format!("Ruleset '{name}' not found in registry. Available: [{}]", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_names_every_round_the_reference_registers() {
        assert_eq!(ruleset("mlcommons-current").unwrap().version, "v6.1");
        assert_eq!(ruleset("mlperf-edge-current").unwrap().scheduler_rng_seed, 42);
        assert_eq!(
            ruleset("mlperf-inference-v5.1").unwrap().sample_index_rng_seed,
            14_771_362_308_971_278_857
        );
        let err = ruleset("mlperf-inference-v9").unwrap_err();
        assert!(err.starts_with("Ruleset 'mlperf-inference-v9' not found in registry. Available: ['mlperf-inference-v5.1'"), "{err}");
    }

    #[test]
    fn a_round_holds_each_models_scenarios_and_targets() {
        let (model, scenarios) = V6_1.model("llama2-70b").unwrap();
        assert_eq!(model.golden("ROUGE1"), Some(44.4312));
        assert_eq!(model.target_settings.len(), 2);
        assert_eq!(scenarios[1].priority, Priority::LowLatencyInteractive);
        assert_eq!((scenarios[1].max_ttft_ms, scenarios[1].max_tpot_ms), (Some(450), Some(40)));
        assert_eq!(scenarios[0].min_sample_count, Some(270_336));
        assert_eq!(scenarios[0].min_duration_ms, 600_000);
        let (edge, rules) = EDGE_V0_1.model("qwen3.6-27b").unwrap();
        assert_eq!(edge.dataset.size, 995);
        assert_eq!(rules[0].min_sample_count, Some(995));
        assert_eq!(
            V6_1.model_error("llama-2-70b"),
            "Model llama-2-70b not found in rules for round v6.1"
        );
    }
}
