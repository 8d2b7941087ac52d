//! `llm-loadgen merge DIR... --out OUT`: one report from the report directories of a sharded
//! run's shards (`report::merge`), written to OUT, with the console summary on stdout.

use std::path::Path;

use crate::cli::MergeArgs;
use crate::error::AppError;
use crate::report::merge::{
    check_shards, load_shard, merged_run_dir, write_merged_inputs, write_merged_report, Shard,
    ShardView,
};

/// `merge DIR... --out OUT [--token-count-source B] [--max-skew-ms MS]`. Returns the exit code.
pub fn run(args: &MergeArgs) -> Result<i32, AppError> {
    let shards = args.dirs.iter().map(|d| load_shard(d)).collect::<Result<Vec<_>, _>>()?;
    let views: Vec<ShardView<'_>> = shards
        .iter()
        .map(|s| ShardView { dir: &s.run.dir, file: &s.file, written_unix_ns: s.written_unix_ns })
        .collect();
    let timeline = check_shards(&views, args.max_skew_ms.saturating_mul(1_000_000))?;
    let out = &args.out;
    refuse_shard_as_out(&shards, out)?;
    std::fs::create_dir_all(out).map_err(|e| {
        AppError::Setup(format!("cannot create {}: {e}; pass a writable --out", out.display()))
    })?;
    // The merge works in shard order, whatever order the directories were given in.
    let mut order: Vec<usize> = (0..shards.len()).collect();
    order.sort_by_key(|&i| shards[i].file.index);
    write_merged_inputs(&shards, &order, &timeline, out)?;
    let merged = merged_run_dir(&shards, &order, &timeline, out)?;
    let primary = merged.basis(args.token_count_source)?;
    let (summary, info) = write_merged_report(&merged, primary, &shards, &order, &timeline)?;
    let mut console = crate::report::console_summary(&summary, &info, &merged.dir);
    console.push_str(&format!(
        "Merged {} shards (plan {}); their starts lay within {:.3} ms\n",
        order.len(),
        shards[order[0]].file.plan_hash,
        timeline.skew_ns as f64 / 1e6
    ));
    crate::commands::print_stdout(&crate::redact::redact(&console))?;
    Ok(0)
}

/// OUT must not be one of the shards: its files would be replaced by the merge's.
fn refuse_shard_as_out(shards: &[Shard], out: &Path) -> Result<(), AppError> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let target = canon(out);
    match shards.iter().find(|s| canon(&s.run.dir) == target) {
        Some(s) => Err(AppError::Usage(format!(
            "--out {} is the shard directory {}; give a directory of its own",
            out.display(),
            s.run.dir.display()
        ))),
        None => Ok(()),
    }
}
