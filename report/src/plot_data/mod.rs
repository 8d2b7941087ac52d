//! The data behind `plot`'s pictures, taken from a replayed run by the rules its report
//! follows: the per-sample series (`series`), the arithmetic over them (`bins`) and each Poisson
//! sample's issue lag rebuilt from the log and the seeded schedule (`lag`). Drawing them is the
//! binary's (`commands/plot`).

pub mod bins;
pub mod lag;
pub mod series;
