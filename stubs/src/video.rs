//! The video stub: trtllm-serve's `POST /v1/videos/generations` as the reference's video
//! adapter reads it. After a fixed delay it answers `{"video_id","video_path"}`, or
//! `{"video_id","video_bytes"}` (a tiny base64 mp4) when the request asks `response_format:
//! video_bytes`, or the raw mp4 bytes themselves when configured (`VideoConfig::raw_mp4`), so
//! a client's three ways of reading the answer can each be tested.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::Value;

pub use crate::config::VideoConfig;
use crate::plan::{End, Plan};
use crate::render::{json_response, json_str};

/// A 32-byte mp4: an ISO BMFF `ftyp` box (the signature at bytes 4..8) and an empty `free` box.
pub const TINY_MP4: &[u8] = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2\x00\x00\x00\x08free";

/// `TINY_MP4` in base64, as a `video_bytes` answer carries it.
pub const TINY_MP4_BASE64: &str = "AAAAGGZ0eXBpc29tAAACAGlzb21pc28yAAAACGZyZWU=";

/// Video ids, unique across the stub's workers.
static NEXT_VIDEO: AtomicU64 = AtomicU64::new(1);

/// The answer to one video request received at `received`; `Err` is a body that is not a
/// video request (answered 400).
pub fn answer(
    cfg: &VideoConfig,
    body: &[u8],
    received: Instant,
    keep: End,
) -> Result<Plan, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("invalid json body: {e}"))?;
    if !v.get("prompt").is_some_and(Value::is_string) {
        return Err("prompt: a string is required".into());
    }
    let keep_alive = keep == End::KeepAlive;
    let id = format!("video_{}", NEXT_VIDEO.fetch_add(1, Ordering::Relaxed));
    let bytes = if cfg.raw_mp4 {
        let connection = if keep_alive { "keep-alive" } else { "close" };
        let mut out = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\nContent-Length: {}\r\n\
             Connection: {connection}\r\n\r\n",
            TINY_MP4.len()
        )
        .into_bytes();
        out.extend_from_slice(TINY_MP4);
        out
    } else {
        let body = match v.get("response_format").and_then(Value::as_str) {
            Some("video_bytes") => {
                format!("{{\"video_id\":{},\"video_bytes\":\"{TINY_MP4_BASE64}\"}}", json_str(&id))
            }
            _ => {
                let path = format!("{}/{id}.mp4", cfg.video_dir.trim_end_matches('/'));
                format!("{{\"video_id\":{},\"video_path\":{}}}", json_str(&id), json_str(&path))
            }
        };
        json_response(200, "OK", &body, keep_alive)
    };
    Ok(Plan {
        pieces: vec![bytes],
        deadlines: Some(vec![received + cfg.delay]),
        end: keep,
        cache: None,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn body_of(plan: &Plan) -> String {
        let text = String::from_utf8_lossy(&plan.pieces[0]).to_string();
        text.split("\r\n\r\n").nth(1).unwrap_or_default().to_string()
    }

    #[test]
    fn each_answer_kind_and_its_delay() {
        let cfg = VideoConfig { delay: Duration::from_millis(40), ..VideoConfig::default() };
        let now = Instant::now();
        let plan = answer(&cfg, br#"{"prompt":"p"}"#, now, End::KeepAlive).unwrap();
        assert_eq!(plan.deadlines, Some(vec![now + Duration::from_millis(40)]));
        let v: Value = serde_json::from_str(&body_of(&plan)).unwrap();
        let id = v["video_id"].as_str().unwrap();
        assert_eq!(v["video_path"], format!("/tmp/videos/{id}.mp4"));
        let asked = br#"{"prompt":"p","response_format":"video_bytes"}"#;
        let v: Value =
            serde_json::from_str(&body_of(&answer(&cfg, asked, now, End::KeepAlive).unwrap()))
                .unwrap();
        assert_eq!(v["video_bytes"], TINY_MP4_BASE64);
        let raw = VideoConfig { raw_mp4: true, ..cfg };
        let plan = answer(&raw, asked, now, End::KeepAlive).unwrap();
        assert!(plan.pieces[0].ends_with(TINY_MP4));
        assert_eq!(&TINY_MP4[4..8], b"ftyp");
        assert!(answer(&raw, br#"{"size":"1x1"}"#, now, End::KeepAlive).is_err());
    }
}
