//! A chat answer that is one tool call, shaped as the OpenAI API shapes it: non-streaming, a
//! `message` with `tool_calls` and `finish_reason: "tool_calls"`; streaming, a first event
//! with the call's index, id, type and function name (empty arguments), a second with the
//! arguments, then the finish event, the usage frame when asked and `[DONE]`, laid out in HTTP
//! chunks as `render` lays out text streams.

use std::fmt::Write as _;

use crate::chat_turn::TOOL_ARGUMENTS;
use crate::render::{
    chunk, chunk_prefix, head_fields, json_response, json_str, sse, usage_json_with, Rendered,
    Reply, MALFORMED_FRAME, SSE_HEAD,
};

/// One call the stub makes.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    /// `id`, e.g. `call_3`.
    pub id: &'a str,
    /// The function's name.
    pub name: &'a str,
}

impl ToolCall<'_> {
    /// `completion_tokens` of the call: the characters of its name and arguments.
    fn completion_tokens(&self) -> u64 {
        (self.name.chars().count() + TOOL_ARGUMENTS.len()) as u64
    }
}

/// Renders `call` as the answer to a chat request (`reply.text` is not used).
pub fn render_tool_call(reply: &Reply<'_>, call: ToolCall<'_>) -> Rendered {
    if !reply.stream {
        let body = plain_body(reply, call);
        return Rendered { pieces: vec![json_response(200, "OK", &body, true)] };
    }
    let mut pieces = vec![SSE_HEAD.as_bytes().to_vec()];
    for (i, event) in [name_event(reply, call), arguments_event(reply)].iter().enumerate() {
        let malformed = reply.malformed_every.is_some_and(|n| (i as u64 + 1) % n.max(1) == 0);
        let frame = if malformed {
            String::from_utf8_lossy(MALFORMED_FRAME).into_owned()
        } else {
            sse(event)
        };
        pieces.push(chunk(frame.as_bytes()));
    }
    let mut tail = chunk_prefix(reply);
    tail.push_str(",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}");
    let mut tail = sse(&tail);
    if reply.usage_frame {
        if let Some(usage) = usage_json_with(reply, call.completion_tokens()) {
            let frame = format!("{},\"choices\":[],\"usage\":{usage}}}", chunk_prefix(reply));
            tail.push_str(&sse(&frame));
        }
    }
    tail.push_str("data: [DONE]\n\n");
    let mut last = chunk(tail.as_bytes());
    last.extend_from_slice(b"0\r\n\r\n");
    pieces.push(last);
    Rendered { pieces }
}

fn plain_body(reply: &Reply<'_>, call: ToolCall<'_>) -> String {
    let mut body = head_fields(reply, "chat.completion");
    let _ = write!(
        body,
        ",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":null,\
         \"tool_calls\":[{{\"id\":{},\"type\":\"function\",\"function\":{{\"name\":{},\
         \"arguments\":{}}}}}],\"refusal\":null}},\"finish_reason\":\"tool_calls\"}}]",
        json_str(call.id),
        json_str(call.name),
        json_str(TOOL_ARGUMENTS)
    );
    if let Some(usage) = usage_json_with(reply, call.completion_tokens()) {
        let _ = write!(body, ",\"usage\":{usage}");
    }
    body.push_str(",\"system_fingerprint\":null}");
    body
}

fn name_event(reply: &Reply<'_>, call: ToolCall<'_>) -> String {
    let mut out = chunk_prefix(reply);
    let _ = write!(
        out,
        ",\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":null,\
         \"tool_calls\":[{{\"index\":0,\"id\":{},\"type\":\"function\",\"function\":\
         {{\"name\":{},\"arguments\":\"\"}}}}]}},\"finish_reason\":null}}]}}",
        json_str(call.id),
        json_str(call.name)
    );
    out
}

fn arguments_event(reply: &Reply<'_>) -> String {
    let mut out = chunk_prefix(reply);
    let _ = write!(
        out,
        ",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":\
         {{\"arguments\":{}}}}}]}},\"finish_reason\":null}}]}}",
        json_str(TOOL_ARGUMENTS)
    );
    out
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::http::Route;

    fn reply(stream: bool) -> Reply<'static> {
        Reply {
            route: Route::Chat,
            stream,
            usage_frame: stream,
            model: "m",
            created_unix_s: 0,
            prompt_tokens: 5,
            text: "",
            stream_interval: 10,
            usage_fault: None,
            malformed_every: None,
        }
    }

    #[test]
    fn every_event_and_body_is_json_of_the_openai_shape() {
        let call = ToolCall { id: "call_1", name: "get_weather" };
        let plain = render_tool_call(&reply(false), call).concat();
        let at = plain.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let v: Value = serde_json::from_slice(&plain[at..]).unwrap();
        assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
        assert_eq!(v["usage"]["completion_tokens"], 13);
        let stream = render_tool_call(&reply(true), call);
        assert_eq!(stream.pieces.len(), 4, "head, two events, tail");
        let text = String::from_utf8(stream.concat()).unwrap();
        let frames: Vec<&str> =
            text.split("\n\n").filter_map(|f| f.split("data: ").nth(1)).collect();
        assert_eq!(frames.len(), 5, "{text}");
        for f in &frames[..4] {
            serde_json::from_str::<Value>(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        }
        assert_eq!(frames[4], "[DONE]");
    }
}
