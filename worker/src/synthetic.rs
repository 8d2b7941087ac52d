//! The null endpoint: a worker that opens no connection and answers every sample itself, with
//! a complete response of realistic size, so a run measures the coordinator's pipeline alone.

/// The response every sample of a null-endpoint run gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntheticResponse {
    /// The output text, as a server would have streamed it.
    pub output: Vec<u8>,
    /// Bytes of `output` in the first chunk (streaming runs; 0 = not streamed).
    pub first_chunk_len: u32,
    /// The server's usage counts.
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
}
