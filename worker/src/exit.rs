//! The worker process's exit codes: `run_worker` and the null endpoint's worker end with one,
//! and the coordinator names it when it reaps a worker that died ("exited with code 4").

/// Exit codes of `run_worker`.
pub const EXIT_OK: i32 = 0;
pub const EXIT_SETUP_FAILED: i32 = 3;
pub const EXIT_COORDINATOR_GONE: i32 = 4;
