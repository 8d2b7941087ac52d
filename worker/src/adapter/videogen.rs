//! trtllm-serve's video generation response, as the reference's adapter reads it: a JSON
//! `{"video_id","video_path"}` (the output is the path), a JSON `{"video_id","video_bytes"}`
//! with the video as a base64 string (a payload response: checked, not kept, so its output is
//! empty), or raw mp4 bytes (an ISO BMFF `ftyp` box at byte 4), written to the fallback
//! directory as `<sample uuid>.mp4` (the output is that file's path). Any other key, a missing
//! key, or any other body fails the sample with the reason.

use std::path::Path;

use serde_json::{Map, Value};

use super::accumulator::{cut_at_char, Accumulator, ERROR_QUOTE_BYTES};

/// The environment variable naming where raw mp4 responses are written (the reference's).
pub const FALLBACK_DIR_ENV: &str = "INFERENCE_ENDPOINT_VIDEOGEN_FALLBACK_DIR";

/// What a 200 body is.
#[derive(Debug, PartialEq, Eq)]
pub enum VideoResponse {
    /// The server saved the video and answered its path.
    Path(String),
    /// The video came base64-encoded in the body.
    Payload,
    /// The body is the video itself.
    Mp4,
    /// The endpoint's `{"error": …}`: its message (else the value as JSON).
    Error(String),
}

/// Reads a body; `Err` says why it is none of the answers.
pub fn classify(body: &[u8]) -> Result<VideoResponse, String> {
    if body.len() >= 8 && &body[4..8] == b"ftyp" {
        return Ok(VideoResponse::Mp4);
    }
    let map: Map<String, Value> = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err("the body is JSON but not an object".into()),
        Err(e) => return Err(format!("the body is neither JSON nor an mp4 video: {e}")),
    };
    if let Some(error) = map.get("error") {
        let message = error.get("message").and_then(Value::as_str);
        return Ok(VideoResponse::Error(message.map_or_else(|| error.to_string(), str::to_string)));
    }
    let (kind, keys) = match map.get("video_bytes") {
        Some(Value::String(_)) => (VideoResponse::Payload, ["video_id", "video_bytes"]),
        _ => (VideoResponse::Path(String::new()), ["video_id", "video_path"]),
    };
    let extra: Vec<&str> = map.keys().map(String::as_str).filter(|k| !keys.contains(k)).collect();
    if !extra.is_empty() {
        return Err(format!(
            "unexpected key(s) {} (a {} answer has only {})",
            extra.join(", "),
            keys[1],
            keys.join(" and ")
        ));
    }
    for key in keys {
        match map.get(key) {
            Some(Value::String(_)) => {}
            Some(v) => return Err(format!("{key} is not a string: {v}")),
            None => return Err(format!("{key} is missing (a {} answer has both)", keys[1])),
        }
    }
    Ok(match kind {
        VideoResponse::Path(_) => {
            VideoResponse::Path(map["video_path"].as_str().unwrap_or_default().to_string())
        }
        other => other,
    })
}

/// Writes raw video bytes to `<dir>/<uuid>.mp4` (the directory made when missing); returns the
/// path as the output names it.
pub fn write_fallback(dir: Option<&Path>, sample_id: u64, body: &[u8]) -> Result<String, String> {
    let Some(dir) = dir else {
        return Err(format!(
            "the endpoint answered raw video bytes ({} B), but {FALLBACK_DIR_ENV} is not set; \
             point it at a directory (shared with the scorer) where the videos are written",
            body.len()
        ));
    };
    let path = dir.join(format!("{sample_id:032x}.mp4"));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, body))
        .map_err(|e| format!("cannot write the video to {}: {e}", path.display()))?;
    Ok(path.display().to_string())
}

/// A whole body: the output is the video's path (empty for a payload answer); `false` with the
/// reason in `malformed_quote` when the body is none of the answers.
pub(crate) fn on_body(acc: &mut Accumulator, body: &[u8]) -> bool {
    let result = match classify(body) {
        Ok(VideoResponse::Error(message)) => {
            acc.stream_error = true;
            acc.error_message.extend_from_slice(cut_at_char(message.as_bytes(), ERROR_QUOTE_BYTES));
            return true;
        }
        Ok(VideoResponse::Path(path)) => Ok(path),
        Ok(VideoResponse::Payload) => Ok(String::new()),
        Ok(VideoResponse::Mp4) => {
            write_fallback(acc.video_fallback_dir.as_deref(), acc.sample_id, body)
        }
        Err(why) => Err(why),
    };
    match result {
        Ok(path) => {
            acc.append(path.as_bytes());
            true
        }
        Err(why) => {
            acc.malformed_quote.extend_from_slice(cut_at_char(why.as_bytes(), ERROR_QUOTE_BYTES));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::ApiType;

    const MP4: &[u8] = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2";

    #[test]
    fn each_answer_is_read_as_the_reference_reads_it() {
        let path = br#"{"video_id":"v1","video_path":"/lustre/v1.mp4"}"#;
        assert_eq!(classify(path), Ok(VideoResponse::Path("/lustre/v1.mp4".into())));
        let payload = br#"{"video_id":"v1","video_bytes":"AAAA"}"#;
        assert_eq!(classify(payload), Ok(VideoResponse::Payload));
        assert_eq!(classify(MP4), Ok(VideoResponse::Mp4));
    }

    #[test]
    fn extra_missing_or_mistyped_keys_fail() {
        for (body, why) in [
            (
                r#"{"video_id":"v","video_path":"/p","video_bytes":null}"#,
                "unexpected key(s) video_bytes",
            ),
            (r#"{"video_id":"v","video_path":"/p","size":"1x1"}"#, "unexpected key(s) size"),
            (
                r#"{"video_id":"v","video_bytes":"AA","video_path":"/p"}"#,
                "unexpected key(s) video_path",
            ),
            (r#"{"video_path":"/p"}"#, "video_id is missing"),
            (r#"{"video_id":7,"video_path":"/p"}"#, "video_id is not a string"),
            (r#"[1]"#, "not an object"),
            ("not json", "neither JSON nor an mp4"),
        ] {
            let err = classify(body.as_bytes()).unwrap_err();
            assert!(err.contains(why), "{body}: {err}");
        }
    }

    fn acc(dir: Option<&Path>) -> Accumulator {
        let mut acc = Accumulator::new(ApiType::Videogen, 1 << 16);
        acc.video_fallback_dir = dir.map(Path::to_path_buf);
        acc.sample_id = 0xabc;
        acc
    }

    #[test]
    fn the_output_is_the_path_or_empty_for_a_payload() {
        let mut a = acc(None);
        assert!(a.on_body(br#"{"video_id":"v","video_path":"/lustre/v.mp4"}"#));
        assert_eq!(a.output, b"/lustre/v.mp4");
        let mut a = acc(None);
        assert!(a.on_body(br#"{"video_id":"v","video_bytes":"AAAA"}"#));
        assert!(a.output.is_empty() && !a.stream_error);
    }

    #[test]
    fn raw_mp4_goes_to_the_fallback_dir_or_fails_naming_the_variable() {
        let mut a = acc(None);
        assert!(!a.on_body(MP4));
        let why = String::from_utf8_lossy(&a.malformed_quote).to_string();
        assert!(why.contains(FALLBACK_DIR_ENV) && why.contains("is not set"), "{why}");
        let dir = std::env::temp_dir().join(format!("videogen-adapter-{}", std::process::id()));
        let mut a = acc(Some(&dir.join("nested")));
        assert!(a.on_body(MP4));
        let file = dir.join("nested").join(format!("{:032x}.mp4", 0xabc));
        assert_eq!(String::from_utf8_lossy(&a.output), file.display().to_string());
        assert_eq!(std::fs::read(&file).unwrap(), MP4);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_error_body_is_the_endpoint_s_error() {
        let mut a = acc(None);
        assert!(a.on_body(br#"{"error":{"message":"out of memory","code":500}}"#));
        assert!(a.stream_error);
        assert_eq!(a.error_message, b"out of memory");
    }
}
