//! A hand scanner for the common shape of an OpenAI streaming frame or non-streaming body (plain
//! strings, integers, `null`s, one choice, a `usage` object of plain counts). It answers only
//! when it is sure to agree with serde_json on the same bytes and declines everything else,
//! which then takes the serde path; property tests in `openai.rs` check the agreement over
//! generated frames and bodies.

use loadgen_wire::FinishReason;

use super::usage::{UsageCounts, UsageValue};

/// What the serde path would read from a frame of the plain shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PlainFrame<'a> {
    /// `choices` held an element.
    pub choice: bool,
    /// `choices[0].delta` was an object (not absent, not `null`).
    pub delta: bool,
    /// `choices[0].delta.content` (valid UTF-8).
    pub content: Option<&'a [u8]>,
    /// `choices[0].text` (completions; valid UTF-8).
    pub text: Option<&'a [u8]>,
    /// `choices[0].finish_reason`; `None` when absent or `null`.
    pub finish: FinishReason,
    /// `choices[0].message` was an object (a non-streaming chat body).
    pub message: bool,
    /// `choices[0].message.content` (valid UTF-8).
    pub message_content: Option<&'a [u8]>,
    /// A `usage` object whose counts are plain integers; `None` when absent or `null`.
    pub usage: Option<UsageCounts>,
}

/// Longest frame head (the bytes before the `choices` value) kept for the next frame.
const MAX_HEAD_BYTES: usize = 256;

/// The head of the last accepted frame (see `plain_frame`), with the struct fields it held:
/// serde refuses a field given twice, so a skipped head's fields still count.
#[derive(Debug, Default)]
pub(crate) struct ScanHead {
    pub bytes: Vec<u8>,
    /// The head held the top-level `object` key.
    object: bool,
    /// The head held the top-level `message` key.
    message: bool,
}

impl ScanHead {
    pub(crate) fn with_capacity(bytes: usize) -> ScanHead {
        ScanHead { bytes: Vec::with_capacity(bytes), object: false, message: false }
    }
}

/// Reads a frame of the plain shape; `None` means "not sure, ask serde" (never "malformed").
///
/// `head` carries, from one frame to the next, the bytes of the last accepted frame up to its
/// `choices` value (`{"id":...,"model":...,"choices":`), when everything before `choices` was an
/// ignored scalar. A frame that starts with the same bytes parses the same way up to there, so
/// the scan resumes at `choices`: the frames of one stream usually differ only after it.
pub(crate) fn plain_frame<'a>(json: &'a [u8], head: &mut ScanHead) -> Option<PlainFrame<'a>> {
    let mut cur = Cursor { bytes: json, at: 0 };
    let mut frame = PlainFrame {
        choice: false,
        delta: false,
        content: None,
        text: None,
        finish: FinishReason::None,
        message: false,
        message_content: None,
        usage: None,
    };
    let (mut seen_choices, mut seen_usage) = (false, false);
    let (mut seen_object, mut seen_message) = (false, false);
    let mut first = true;
    let mut head_end = None;
    if !head.bytes.is_empty() && json.starts_with(&head.bytes) {
        cur.at = head.bytes.len();
        seen_choices = true;
        (seen_object, seen_message) = (head.object, head.message);
        first = false;
        cur.choices(&mut frame)?;
    } else {
        cur.open_object()?;
    }
    let mut head_keys = (false, false);
    while let Some(key) = cur.next_key(&mut first)? {
        match key {
            b"choices" => {
                once(&mut seen_choices)?;
                if !seen_usage {
                    head_end = Some(cur.at);
                    head_keys = (seen_object, seen_message);
                }
                cur.choices(&mut frame)?;
            }
            // vLLM's unwrapped error object (`"object": "error"`) is the serde path's to read.
            b"object" => {
                once(&mut seen_object)?;
                if cur.peek()? == b'"' {
                    (cur.string()? != b"error").then_some(())?;
                } else {
                    cur.scalar()?;
                }
            }
            b"message" => {
                once(&mut seen_message)?;
                cur.scalar()?;
            }
            b"usage" => {
                once(&mut seen_usage)?;
                if cur.peek()? == b'n' {
                    cur.null()?;
                } else {
                    frame.usage = Some(cur.usage()?);
                }
            }
            // An endpoint's error (even `"error": null`) is the serde path's to read.
            b"error" => return None,
            _ => cur.scalar()?,
        }
    }
    cur.ws();
    if cur.at != json.len() {
        return None;
    }
    if let Some(end) = head_end.filter(|&end| end <= MAX_HEAD_BYTES) {
        head.bytes.clear();
        head.bytes.extend_from_slice(&json[..end]);
        (head.object, head.message) = head_keys;
    }
    Some(frame)
}

/// serde rejects a struct field given twice; so do we (by declining).
fn once(seen: &mut bool) -> Option<()> {
    (!std::mem::replace(seen, true)).then_some(())
}

/// Whether any byte of `word` is `"`, `\\`, a control byte (< 0x20) or not ASCII (>= 0x80).
/// The zero-byte trick (`(x - 0x01..) & !x & 0x80..`) may misplace a hit but never misses one
/// nor invents one when no byte matches, which is all a yes/no needs.
fn has_special_byte(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    let quote = zero_in(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_in(word ^ (ONES * u64::from(b'\\')));
    (control | quote | backslash | (word & HIGH)) != 0
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    fn null(&mut self) -> Option<()> {
        self.literal(b"null")
    }

    fn open_object(&mut self) -> Option<()> {
        self.ws();
        self.eat(b'{')
    }

    /// The next key of an object whose `{` was eaten, with the cursor left on its value;
    /// `Some(None)` after the closing `}`.
    fn next_key(&mut self, first: &mut bool) -> Option<Option<&'a [u8]>> {
        self.ws();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(None);
        }
        if !std::mem::replace(first, false) {
            self.eat(b',')?;
            self.ws();
        }
        let key = self.string()?;
        self.ws();
        self.eat(b':')?;
        self.ws();
        Some(Some(key))
    }

    /// The bytes of a string without escapes or control bytes, valid UTF-8. A plain byte loop:
    /// the strings of a frame are short, where memchr's and from_utf8's set-up cost more than the
    /// scan.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = &self.bytes[self.at..];
        let mut ascii = true;
        let mut end = 0;
        // Eight bytes at a time while none is special; the byte loop below places the end.
        while let Some(word) = rest.get(end..end + 8) {
            if has_special_byte(u64::from_le_bytes(word.try_into().ok()?)) {
                break;
            }
            end += 8;
        }
        loop {
            match *rest.get(end)? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                byte => ascii &= byte < 0x80,
            }
            end += 1;
        }
        let text = &rest[..end];
        if !ascii {
            std::str::from_utf8(text).ok()?;
        }
        self.at += end + 1;
        Some(text)
    }

    /// A string, `null`, `true`, `false` or an integer without leading zeros.
    fn scalar(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'n' => self.null(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            _ => self.integer(),
        }
    }

    /// `-?(0|[1-9][0-9]*)`; a fraction or exponent after it fails at the caller's next token.
    fn integer(&mut self) -> Option<()> {
        if self.peek()? == b'-' {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.at += 1;
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// A plain string or `null`.
    fn opt_string(&mut self) -> Option<Option<&'a [u8]>> {
        if self.peek()? == b'n' {
            return self.null().map(|_| None);
        }
        self.string().map(Some)
    }

    /// `null`, `[]` or an array of exactly one choice object.
    fn choices(&mut self, frame: &mut PlainFrame<'a>) -> Option<()> {
        if self.peek()? == b'n' {
            return self.null();
        }
        self.eat(b'[')?;
        self.ws();
        if self.eat(b']').is_some() {
            return Some(());
        }
        frame.choice = true;
        self.choice(frame)?;
        self.ws();
        self.eat(b']')
    }

    fn choice(&mut self, frame: &mut PlainFrame<'a>) -> Option<()> {
        let (mut seen_delta, mut seen_text, mut seen_finish, mut seen_message) =
            (false, false, false, false);
        self.eat(b'{')?;
        let mut first = true;
        while let Some(key) = self.next_key(&mut first)? {
            match key {
                b"delta" => {
                    once(&mut seen_delta)?;
                    if self.peek()? == b'n' {
                        self.null()?;
                    } else {
                        frame.delta = true;
                        frame.content = self.delta()?;
                    }
                }
                b"text" => {
                    once(&mut seen_text)?;
                    frame.text = self.opt_string()?;
                }
                b"finish_reason" => {
                    once(&mut seen_finish)?;
                    let reason = self.opt_string()?.map(std::str::from_utf8).transpose().ok()?;
                    frame.finish = reason.map_or(FinishReason::None, FinishReason::parse);
                }
                b"message" => {
                    once(&mut seen_message)?;
                    if self.peek()? == b'n' {
                        self.null()?;
                    } else {
                        frame.message = true;
                        frame.message_content = self.delta()?;
                    }
                }
                _ => self.scalar()?,
            }
        }
        Some(())
    }

    /// A `delta` or `message` object; its `content`. Reasoning and tool-call fields are read
    /// only in their `null` form.
    fn delta(&mut self) -> Option<Option<&'a [u8]>> {
        let mut seen = [false; 4];
        let mut content = None;
        self.eat(b'{')?;
        let mut first = true;
        while let Some(key) = self.next_key(&mut first)? {
            match key {
                b"content" => {
                    once(&mut seen[0])?;
                    content = self.opt_string()?;
                }
                // Only their `null` form: anything else counts as output, which serde reads.
                b"reasoning_content" | b"reasoning" | b"tool_calls" => {
                    let slot = match key {
                        b"reasoning_content" => 1,
                        b"reasoning" => 2,
                        _ => 3,
                    };
                    once(&mut seen[slot])?;
                    self.null()?;
                }
                _ => self.scalar()?,
            }
        }
        Some(content)
    }

    /// A `usage` object: `prompt_tokens` and `completion_tokens` as plain non-negative integers
    /// (anything else, serde reads), other keys ignored scalars.
    fn usage(&mut self) -> Option<UsageCounts> {
        let mut counts = UsageCounts::default();
        let (mut seen_prompt, mut seen_completion) = (false, false);
        self.eat(b'{')?;
        let mut first = true;
        while let Some(key) = self.next_key(&mut first)? {
            match key {
                b"prompt_tokens" => {
                    once(&mut seen_prompt)?;
                    counts.prompt_tokens = Some(UsageValue::Int(self.count()?));
                }
                b"completion_tokens" => {
                    once(&mut seen_completion)?;
                    counts.completion_tokens = Some(UsageValue::Int(self.count()?));
                }
                _ => self.scalar()?,
            }
        }
        Some(counts)
    }

    /// `0|[1-9][0-9]*` of at most 18 digits (so it fits a u64), not followed by a fraction or
    /// exponent.
    fn count(&mut self) -> Option<u64> {
        let start = self.at;
        let mut value = 0u64;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            // Wrapping: past 18 digits the value is discarded below, and a checked overflow
            // would panic on a 20-digit count.
            value = value.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
            self.at += 1;
        }
        let digits = self.at - start;
        let leading_zero = digits > 1 && self.bytes[start] == b'0';
        if digits == 0 || digits > 18 || leading_zero {
            return None;
        }
        match self.peek()? {
            b'.' | b'e' | b'E' => None,
            _ => Some(value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_common_frames() {
        let content = br#"{"id":"r","object":"chat.completion.chunk","created":17,"model":"m","choices":[{"index":0,"delta":{"content":"h\u00e9"},"finish_reason":null}]}"#;
        // An escape anywhere in a string is the serde path's job.
        assert_eq!(plain_frame(content, &mut ScanHead::default()), None);
        let content = r#"{"id":"r","object":"chat.completion.chunk","created":17,"model":"m","choices":[{"index":0,"delta":{"content":"hé"},"finish_reason":null}]}"#;
        let frame = plain_frame(content.as_bytes(), &mut ScanHead::default()).unwrap();
        assert!(frame.choice && frame.delta);
        assert_eq!((frame.content, frame.finish), (Some("hé".as_bytes()), FinishReason::None));
        let finish = br#" {"choices": [ {"index": 0, "delta": {}, "finish_reason": "stop"} ] } "#;
        let frame = plain_frame(finish, &mut ScanHead::default()).unwrap();
        assert_eq!((frame.content, frame.finish), (None, FinishReason::Stop));
        let text = br#"{"choices":[{"index":0,"text":"ab","logprobs":null,"finish_reason":null}]}"#;
        assert_eq!(plain_frame(text, &mut ScanHead::default()).unwrap().text, Some(&b"ab"[..]));
    }

    #[test]
    fn reads_plain_bodies_and_usage() {
        let body = br#"{"id":"r","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"xy","refusal":null},"finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":0,"total_tokens":10},"system_fingerprint":null}"#;
        let frame = plain_frame(body, &mut ScanHead::default()).unwrap();
        assert!(frame.choice && frame.message && !frame.delta);
        assert_eq!((frame.message_content, frame.finish), (Some(&b"xy"[..]), FinishReason::Length));
        let usage = frame.usage.unwrap();
        assert_eq!(usage.prompt_tokens, Some(UsageValue::Int(10)));
        assert_eq!(usage.completion_tokens, Some(UsageValue::Int(0)));
        let frame = plain_frame(br#"{"choices":[],"usage":{}}"#, &mut ScanHead::default()).unwrap();
        assert_eq!(frame.usage, Some(UsageCounts::default()));
        let frame =
            plain_frame(br#"{"choices":[],"usage":null}"#, &mut ScanHead::default()).unwrap();
        assert_eq!(frame.usage, None);
        let most = br#"{"choices":[],"usage":{"prompt_tokens":999999999999999999}}"#;
        let usage = plain_frame(most, &mut ScanHead::default()).unwrap().usage.unwrap();
        assert_eq!(usage.prompt_tokens, Some(UsageValue::Int(999_999_999_999_999_999)));
    }

    #[test]
    fn special_byte_check_matches_a_byte_loop() {
        let special = |b: u8| b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b);
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Mostly plain ASCII with an occasional special byte, at every position.
            let mut bytes = [b'a'; 8];
            for (i, byte) in bytes.iter_mut().enumerate() {
                let r = (state >> (i * 8)) as u8;
                *byte = if r % 7 == 0 { r } else { b' ' + r % 90 };
            }
            let word = u64::from_le_bytes(bytes);
            assert_eq!(has_special_byte(word), bytes.iter().any(|&b| special(b)), "{bytes:?}");
        }
        for b in 0..=255u8 {
            let mut bytes = [b'x'; 8];
            bytes[b as usize % 8] = b;
            assert_eq!(has_special_byte(u64::from_le_bytes(bytes)), special(b), "byte {b}");
        }
    }

    #[test]
    fn a_repeated_head_is_skipped_and_a_changed_one_rescanned() {
        let mut head = ScanHead::default();
        let a = br#"{"id":"r","model":"m","choices":[{"delta":{"content":"a"}}]}"#;
        assert_eq!(plain_frame(a, &mut head).unwrap().content, Some(&b"a"[..]));
        assert_eq!(head.bytes, br#"{"id":"r","model":"m","choices":"#);
        let b = br#"{"id":"r","model":"m","choices":[{"delta":{"content":"b"}}],"choices":[]}"#;
        assert_eq!(plain_frame(b, &mut head), None, "a duplicate after a skipped head");
        let c = br#"{"id":"r","model":"m","choices":[{"delta":{}}]} x"#;
        assert_eq!(plain_frame(c, &mut head), None);
        let d = br#"{"usage":null,"choices":[{"delta":{"content":"d"}}]}"#;
        assert_eq!(plain_frame(d, &mut head).unwrap().content, Some(&b"d"[..]));
        assert_eq!(
            head.bytes, br#"{"id":"r","model":"m","choices":"#,
            "a head with usage is not kept"
        );
    }

    #[test]
    fn a_twenty_digit_count_declines_without_overflow() {
        let frame = br#"{"choices":[],"usage":{"prompt_tokens":99999999999999999999}}"#;
        assert_eq!(plain_frame(frame, &mut ScanHead::default()), None);
    }

    #[test]
    fn declines_what_it_is_not_sure_of() {
        for frame in [
            &br#"{"choices":[{"delta":{"content":"a"}},{"delta":{}}]}"#[..],
            br#"{"choices":[],"usage":{"prompt_tokens":-1}}"#,
            br#"{"choices":[],"usage":{"prompt_tokens":1.0}}"#,
            br#"{"choices":[],"usage":{"prompt_tokens":1e2}}"#,
            br#"{"choices":[],"usage":{"prompt_tokens":007}}"#,
            br#"{"choices":[],"usage":{"prompt_tokens":1234567890123456789}}"#,
            br#"{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens":2}}"#,
            br#"{"choices":[],"usage":{"prompt_tokens":null}}"#,
            br#"{"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":0}}}"#,
            br#"{"choices":[{"message":{"content":"a"},"message":null}]}"#,
            br#"{"choices":[{"message":{"content":"a","reasoning_content":"r"}}]}"#,
            br#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            br#"{"choices":[{"delta":{"reasoning_content":"r"}}]}"#,
            br#"{"created":1.5,"choices":[]}"#,
            br#"{"created":01,"choices":[]}"#,
            br#"{"x":[1],"choices":[]}"#,
            br#"{"choices":[],}"#,
            br#"{"choices":[]} x"#,
            b"{\"choices\":[{\"delta\":{\"content\":\"a\x01\"}}]}",
            b"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}",
        ] {
            assert_eq!(
                plain_frame(frame, &mut ScanHead::default()),
                None,
                "{}",
                String::from_utf8_lossy(frame)
            );
        }
    }
}
