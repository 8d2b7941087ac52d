//! loadgen-accuracy: accuracy scoring as the reference scores it: answer extractors, scorers,
//! and the name registry an `accuracy_config` resolves through (issue 15). Pure code: the
//! plan resolves the names through it and the binary's report scores a finished run with it.

pub mod agentic_inline;
pub mod bfcl;
mod error;
pub mod extract;
pub mod funcall;
pub mod porter;
pub mod pyargs;
pub mod pyvalue;
pub mod rouge;
mod sample;
pub mod score;

#[cfg(test)]
mod rouge_fixture;
#[cfg(test)]
mod tests;

pub use bfcl::Breakdown;
pub use error::AccuracyError;
pub use loadgen_py::string::{is_space as py_is_space, strip as py_strip};
pub use sample::Sample;
pub use score::{RougeReport, ScoreValue, Scored};

/// An answer extractor (`accuracy_config.extractor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extractor {
    Abcd,
    BoxedMath,
    Identity,
    PythonCode,
    FunctionCall,
}

impl Extractor {
    /// The name the reference registers it under.
    pub fn name(self) -> &'static str {
        match self {
            Extractor::Abcd => "abcd_extractor",
            Extractor::BoxedMath => "boxed_math_extractor",
            Extractor::Identity => "identity_extractor",
            Extractor::PythonCode => "python_code_extractor",
            Extractor::FunctionCall => "function_call_extractor",
        }
    }

    /// The answer in `text`, or `None` where the reference's extractor returns `None`. Only
    /// `function_call_extractor` can fail (a text-form call beyond the literals it reads).
    pub fn extract(self, text: &str) -> Result<Option<String>, AccuracyError> {
        Ok(match self {
            Extractor::Abcd => extract::abcd(text),
            Extractor::BoxedMath => extract::boxed_math(text),
            Extractor::Identity => extract::identity(text),
            Extractor::PythonCode => extract::python_code(text),
            Extractor::FunctionCall => return funcall::function_call(text),
        })
    }
}

const EXTRACTORS: [Extractor; 5] = [
    Extractor::Abcd,
    Extractor::BoxedMath,
    Extractor::Identity,
    Extractor::PythonCode,
    Extractor::FunctionCall,
];

/// Extractors the reference has that this build refuses, with why (none today).
const REFUSED_EXTRACTORS: &[(&str, &str)] = &[];

/// A scorer (`accuracy_config.eval_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scorer {
    PassAt1,
    StringMatch,
    Rouge,
    ShopifyCategoryF1,
    /// Scores an agentic run's own turns against its dataset's recorded assistant turns
    /// (`agentic_inline`); it has no per-sample form.
    AgenticInferenceInline,
    BfclV4,
}

const SCORERS: [Scorer; 6] = [
    Scorer::PassAt1,
    Scorer::StringMatch,
    Scorer::Rouge,
    Scorer::ShopifyCategoryF1,
    Scorer::AgenticInferenceInline,
    Scorer::BfclV4,
];

/// Scorers the reference has that need a service or framework outside this tool.
const REFUSED_SCORERS: &[(&str, &str)] = &[
    ("code_bench_scorer", "it runs the generated code in the LiveCodeBench execution service (a container the reference drives over a websocket)"),
    ("swe_bench_scorer", "it runs the SWE-bench harness, which builds and tests repositories in Docker"),
    ("vbench", "it scores generated video with the VBench Python framework and its models"),
    ("legacy_mlperf_deepseek_r1", "it needs the LiveCodeBench execution service and the MLPerf DeepSeek-R1 Python evaluation"),
];

impl Scorer {
    /// The name the reference registers it under.
    pub fn name(self) -> &'static str {
        match self {
            Scorer::PassAt1 => "pass_at_1",
            Scorer::StringMatch => "string_match",
            Scorer::Rouge => "rouge",
            Scorer::ShopifyCategoryF1 => "shopify_category_f1",
            Scorer::AgenticInferenceInline => "agentic_inference_inline",
            Scorer::BfclV4 => "bfcl_v4",
        }
    }

    /// The dataset columns besides the ground truth that the scorer reads for each row, in
    /// the order `Sample::columns` holds them.
    pub fn extra_columns(self) -> &'static [&'static str] {
        match self {
            Scorer::BfclV4 => &["subset", "func_description"],
            _ => &[],
        }
    }

    /// The ground-truth column the reference reads when `accuracy_config.ground_truth` is unset.
    pub fn default_ground_truth_column(self) -> &'static str {
        match self {
            Scorer::ShopifyCategoryF1 => "ground_truth_category",
            _ => "ground_truth",
        }
    }
}

fn known(names: impl Iterator<Item = &'static str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

/// Resolves `accuracy_config.extractor`.
pub fn extractor(name: &str) -> Result<Extractor, AccuracyError> {
    if let Some(e) = EXTRACTORS.iter().find(|e| e.name() == name) {
        return Ok(*e);
    }
    if let Some((_, why)) = REFUSED_EXTRACTORS.iter().find(|(n, _)| *n == name) {
        return Err(AccuracyError::Refused { kind: "extractor", name: name.to_string(), why });
    }
    Err(AccuracyError::UnknownExtractor {
        name: name.to_string(),
        known: known(EXTRACTORS.iter().map(|e| e.name())),
    })
}

/// Resolves `accuracy_config.eval_method`.
pub fn scorer(name: &str) -> Result<Scorer, AccuracyError> {
    if let Some(s) = SCORERS.iter().find(|s| s.name() == name) {
        return Ok(*s);
    }
    if let Some((_, why)) = REFUSED_SCORERS.iter().find(|(n, _)| *n == name) {
        return Err(AccuracyError::Refused { kind: "eval_method", name: name.to_string(), why });
    }
    Err(AccuracyError::UnknownScorer {
        name: name.to_string(),
        known: known(SCORERS.iter().map(|s| s.name())),
    })
}
