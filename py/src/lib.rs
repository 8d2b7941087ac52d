//! loadgen-py: what the reference's Python computes, computed here to the same bits and bytes.
//! One module per thing it imitates, so each imitation exists once in the workspace.

pub mod float_repr;
pub mod json;
pub mod random;
