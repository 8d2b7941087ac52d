//! One completed response as a scorer sees it, below the scorers that share it.

/// One completed response and its row's ground truth. A response with no text is `""`, as the
/// reference reads a COMPLETE event without output; an issued sample with no COMPLETE event is
/// not a `Sample` at all and counts only through `issued`.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// The dataset row (`sample_index`), for error messages.
    pub index: usize,
    pub output: &'a str,
    pub ground_truth: &'a str,
    /// The row's values of the scorer's `extra_columns`, in order (empty for most scorers).
    pub columns: &'a [String],
}
