//! Where the probe's lines go and what its streaming requests got: the two things its report
//! reads from the probe, kept below both (`mod.rs` sends, `report.rs` prints).

use crate::redact::{escape_controls, redact};

use super::client::Exchange;
use super::verdict::StreamUsage;

/// Where the probe's lines go: stdout, or stderr when stdout carries the JSON.
#[derive(Clone, Copy)]
pub struct Console {
    pub(super) json: bool,
    pub(super) verbose: bool,
}

impl Console {
    /// Prints one line: secrets hidden, and the server's control characters (in answers and
    /// errors) escaped.
    pub fn line(&self, text: &str) {
        let text = redact(&escape_controls(text));
        if self.json {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }

    /// With `-v`: the body of a request about to be sent, on stderr.
    pub(super) fn request(&self, what: &str, request: &[u8]) {
        if self.verbose {
            let body = request.split(|&b| b == b'\n').next_back().unwrap_or_default();
            eprintln!("{}", redact(&format!("{what} request: {}", String::from_utf8_lossy(body))));
        }
    }
}

/// What the streaming requests got.
pub struct Streams {
    pub usage: StreamUsage,
    /// The status of the first stream (the one that asked for usage).
    pub first_status: u16,
    pub exchanges: Vec<Exchange>,
}
