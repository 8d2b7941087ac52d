//! What the property-based fuzz targets share: their proptest configuration and split points.

use proptest::prelude::*;

/// proptest's defaults (`PROPTEST_CASES` and the other variables apply), with failures kept
/// in `proptest-regressions/<target>.txt` and replayed first on every run.
pub fn config(regressions_file: &'static str) -> ProptestConfig {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/");
    let path: &'static str = Box::leak(format!("{dir}{regressions_file}").into_boxed_str());
    ProptestConfig {
        failure_persistence: Some(Box::new(prop::test_runner::FileFailurePersistence::Direct(
            path,
        ))),
        ..ProptestConfig::default()
    }
}

/// Up to five sorted split points in `0..=len`: where a byte stream is cut into reads.
pub fn cuts_for(len: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..=len, 0..6).prop_map(|mut cuts| {
        cuts.sort_unstable();
        cuts
    })
}
