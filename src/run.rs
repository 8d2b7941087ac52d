//! Benchmark execution: from a validated plan to a finished report directory.

pub fn run_benchmark(plan: &crate::plan::Plan) -> Result<i32, crate::error::AppError> {
    Err(crate::error::AppError::Execution("benchmark execution is being built".into()))
}
