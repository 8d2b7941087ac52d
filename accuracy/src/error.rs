//! What an accuracy name lookup or a scoring run refuses.

/// What an accuracy name lookup or a scoring run can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccuracyError {
    #[error("unknown extractor {name:?}; known extractors: {known}")]
    UnknownExtractor { name: String, known: String },
    #[error("unknown eval_method {name:?}; known scorers: {known}")]
    UnknownScorer { name: String, known: String },
    #[error("{kind} {name:?} is not supported: {why}")]
    Refused { kind: &'static str, name: String, why: &'static str },
    #[error("{scorer}: no completed responses to score (the reference fails here too); check that the run issued this dataset")]
    NothingToScore { scorer: &'static str },
    #[error("{scorer}: the dataset has no samples, so num_repeats cannot be computed")]
    EmptyDataset { scorer: &'static str },
    #[error("function_call_extractor: the call {call}(...) in a response has {what}, which needs Python's ast to print as the reference does; this build reads literals and dotted names only")]
    UnsupportedCall { call: String, what: String },
    #[error("agentic_inference_inline scores whole conversations (agentic_inline::score), not one output at a time")]
    WholeConversations,
    #[error("bfcl_v4: sample {sample} ({subset}): bfcl-eval's checker raises on it ({why}), so the reference's scoring fails here too; check that row's func_description and ground_truth, and its response")]
    BfclRaises { sample: usize, subset: String, why: String },
    #[error("string_match: the extractor found no answer in a response (sample {sample}); the reference fails on this too — use identity_extractor, or pass_at_1 which scores it 0")]
    NoAnswer { sample: usize },
}
