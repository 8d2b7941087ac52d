//! loadgen-py: what the reference's Python computes, computed here to the same bits and bytes.
//! One module per thing it imitates, so each imitation exists once in the workspace:
//! `float_repr` (`repr(float)`), `json` (`json.dumps`), `numpy` (numpy's `default_rng`), `random` (`random.Random`), `string` (`str.isspace`, `str.strip`), `tool_calls` (`merge_tool_calls`); and
//! `xorshift`, the workspace's one seeded generator for fixtures and property tests.

pub mod float_repr;
pub mod json;
pub mod numpy;
pub mod random;
pub mod string;
pub mod tool_calls;
pub mod xorshift;
