//! Benchmark execution: from a validated plan to a finished report directory.
