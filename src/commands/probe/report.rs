//! One endpoint's probe result: the reference's console lines (requests, latency, sample
//! answers), then the checks beyond it, each a line that says what it found and what it means;
//! the same facts serialize as the endpoint's object of `--json`.

use serde::Serialize;

use super::client::{cut, Exchange};
use super::verdict::{self, Basis, Chunking, OslCheck, StreamUsage};
use super::{Console, Streams};
use crate::tokenizer::Tokenizer;
use crate::yaml::ApiTypeName;

/// Latency of the successful plain requests, milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LatencyMs {
    pub avg: f64,
    pub min: f64,
    pub max: f64,
}

/// One answer shown as a sample.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub id: String,
    pub text: String,
}

/// Usage counts of the plain answers (the first that had them).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PlainUsage {
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
}

/// Client against server ISL of the probe prompt.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct IslCheck {
    pub server: Option<u32>,
    /// The prompt's own tokens.
    pub client_raw: u32,
    /// The prompt through the tokenizer's chat template (chat API only).
    pub client_templated: Option<u32>,
}

/// Everything the probe found about one endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointReport {
    pub url: String,
    pub api_type: &'static str,
    pub requests: u64,
    pub successful: u64,
    pub latency_ms: Option<LatencyMs>,
    pub samples: Vec<Sample>,
    pub errors: Vec<String>,
    /// At least half the plain requests succeeded (else the probe exits 4).
    pub ok: bool,
    pub plain_usage: Option<PlainUsage>,
    pub stream_usage: StreamUsage,
    /// The status of the first stream, which asked for usage.
    pub stream_options_status: Option<u16>,
    pub stream_errors: Vec<String>,
    pub reasoning: bool,
    pub chunking: Option<Chunking>,
    pub osl: Option<OslCheck>,
    pub isl: Option<IslCheck>,
    pub basis: Basis,
    /// Why every request failed when it was the server's certificate: a setup error (exit 3),
    /// as in a benchmark, rather than an endpoint that does not answer.
    #[serde(skip)]
    pub certificate_refused: Option<String>,
}

impl EndpointReport {
    pub fn new(url: &str, api: ApiTypeName, requests: u64, plain: &[Exchange]) -> EndpointReport {
        let ok: Vec<(usize, &Exchange)> =
            plain.iter().enumerate().filter(|(_, e)| e.error.is_none()).collect();
        let ms: Vec<f64> = ok.iter().map(|(_, e)| e.latency_ns() as f64 / 1e6).collect();
        let latency_ms = (!ms.is_empty()).then(|| LatencyMs {
            avg: ms.iter().sum::<f64>() / ms.len() as f64,
            min: ms.iter().copied().fold(f64::INFINITY, f64::min),
            max: ms.iter().copied().fold(0.0, f64::max),
        });
        let samples = ok
            .iter()
            .map(|(i, e)| Sample {
                id: format!("probe-{i}"),
                text: if e.output.is_empty() { "<EMPTY>".into() } else { e.output.clone() },
            })
            .collect();
        let errors = plain
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.error.as_ref().map(|m| format!("probe-{i}: {m}")))
            .collect();
        let plain_usage = ok.iter().find(|(_, e)| e.completion_tokens.is_some()).map(|(_, e)| {
            PlainUsage { prompt_tokens: e.prompt_tokens, completion_tokens: e.completion_tokens }
        });
        let successful = ok.len() as u64;
        EndpointReport {
            url: url.to_string(),
            api_type: api.as_str(),
            requests,
            successful,
            latency_ms,
            samples,
            errors,
            // The reference's rule: fewer than half successful fails the probe.
            ok: successful as f64 >= requests as f64 * 0.5,
            plain_usage,
            stream_usage: StreamUsage::Unknown,
            stream_options_status: None,
            stream_errors: Vec::new(),
            reasoning: ok.iter().any(|(_, e)| e.reasoning),
            chunking: None,
            osl: None,
            isl: None,
            basis: verdict::basis(StreamUsage::Unknown, None, None),
            certificate_refused: plain
                .iter()
                .all(|e| e.certificate_refused)
                .then(|| plain.first().and_then(|e| e.error.clone()))
                .flatten(),
        }
    }

    /// The reference's lines after the requests.
    pub fn print_reference(&self, out: Console) {
        out.line(&format!("Completed: {}/{} successful", self.successful, self.requests));
        if let Some(l) = self.latency_ms {
            out.line(&format!("Avg latency: {:.0}ms", l.avg));
            out.line(&format!("Range: {:.0}ms - {:.0}ms", l.min, l.max));
        }
        if !self.samples.is_empty() {
            out.line(&format!("Sample responses ({} collected):", self.samples.len()));
            for s in &self.samples {
                out.line(&format!("  [{}] {}", s.id, cut(&s.text, 100)));
            }
        }
        if !self.errors.is_empty() {
            out.line(&format!("Errors: {}", self.errors.len()));
            for e in self.errors.iter().take(3) {
                out.line(&format!("  {e}"));
            }
            if self.errors.len() > 3 {
                out.line(&format!("  ... +{} more", self.errors.len() - 3));
            }
        }
        match self.ok {
            true => out.line("Probe successful"),
            false => out.line("Probe failed: Too many errors"),
        }
    }

    /// Folds in the streams and the tokenizer's counts, and decides the basis.
    pub fn add_checks(
        &mut self,
        plain: &[Exchange],
        streams: &Streams,
        tokenizer: Option<&Tokenizer>,
        prompt: &str,
    ) {
        self.stream_usage = streams.usage;
        self.stream_options_status = Some(streams.first_status).filter(|s| *s != 0);
        self.stream_errors = streams.exchanges.iter().filter_map(|e| e.error.clone()).collect();
        let good: Vec<&Exchange> =
            streams.exchanges.iter().filter(|e| e.error.is_none() && e.event_stream).collect();
        self.reasoning |= good.iter().any(|e| e.reasoning);
        let events: Vec<&[_]> = good.iter().map(|e| e.events.as_slice()).collect();
        self.chunking = (!events.is_empty()).then(|| verdict::chunking(&events));
        if let Some(tok) = tokenizer {
            let answers = plain.iter().chain(good.iter().copied()).filter(|e| e.error.is_none());
            let pairs: Vec<(u32, u32)> = answers
                .filter_map(|e| Some((tok.count(&e.output).ok()?, e.completion_tokens?)))
                .collect();
            self.osl = verdict::osl_check(&pairs);
            self.isl = isl_check(tok, self.api_type, prompt, plain, &good);
        }
        self.basis =
            verdict::basis(self.stream_usage, self.stream_options_status, self.osl.as_ref());
    }

    /// The checks beyond the reference, one line each, then the basis line.
    pub fn print_checks(&self, out: Console) {
        if self.successful == 0 {
            out.line("checks skipped: no plain request succeeded");
        } else {
            out.line("Checks beyond the reference:");
            for line in self.check_lines() {
                out.line(&format!("  {line}"));
            }
        }
        out.line(&format!("basis: {} — {}", self.basis.source, self.basis.why));
    }

    fn check_lines(&self) -> Vec<String> {
        let mut lines = vec![self.plain_usage_line(), self.stream_usage_line()];
        lines.extend(self.stream_errors.first().map(|e| format!("first stream error: {e}")));
        lines.push(match self.reasoning {
            true => {
                "reasoning: answers carry reasoning_content (or reasoning); OSL counts it".into()
            }
            false => "reasoning: none (no reasoning_content or reasoning in any answer)".into(),
        });
        lines.extend(self.chunking.as_ref().map(chunking_line));
        lines.extend(self.osl.as_ref().map(osl_line));
        lines.extend(self.isl.as_ref().map(isl_line));
        lines
    }

    fn plain_usage_line(&self) -> String {
        match self.plain_usage {
            Some(u) => format!(
                "usage in plain answers: yes (prompt_tokens {}, completion_tokens {})",
                shown(u.prompt_tokens),
                shown(u.completion_tokens)
            ),
            None => "usage in plain answers: no".into(),
        }
    }

    fn stream_usage_line(&self) -> String {
        let sglang = self.api_type == ApiTypeName::Sglang.as_str();
        let status = self.stream_options_status.unwrap_or(0);
        match (self.stream_usage, sglang) {
            (StreamUsage::Honoured, true) => "usage on streams: yes (meta_info counts)".into(),
            (StreamUsage::Honoured, false) => {
                "usage on streams: yes (stream_options.include_usage honoured)".into()
            }
            (StreamUsage::Absent, true) => "usage on streams: no (no meta_info counts)".into(),
            (StreamUsage::Absent, false) => "usage on streams: no — asked with \
                 stream_options.include_usage, the stream carried no usage"
                .into(),
            (StreamUsage::Rejected, _) => format!(
                "stream_options: rejected (HTTP {status}); the same stream without it succeeds, \
                 so benchmarks that stream need --no-stream-include-usage"
            ),
            (StreamUsage::Unknown, _) => {
                format!("usage on streams: unknown — the streaming requests failed (HTTP {status})")
            }
        }
    }
}

fn shown(n: Option<u32>) -> String {
    n.map_or("missing".into(), |n| n.to_string())
}

fn chunking_line(c: &Chunking) -> String {
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2} ms"));
    let verdict = match c.bursting {
        Some(true) => format!(
            "bursting: {} of {} streams arrived mostly at once (most text events < 0.1 ms \
             apart), so TTFT is about the latency and TPOT means little",
            c.bursting_streams, c.judged_streams
        ),
        Some(false) => {
            "streamed: events arrive spread out, so TTFT and TPOT mean what they say".into()
        }
        None => "too few content events to tell a burst".into(),
    };
    format!(
        "chunking: {} streams, {:.0} events each ({:.0} with text), gaps median {}, max {}; {}",
        c.streams,
        c.events_median,
        c.content_events_median,
        ms(c.gap_ms_median),
        ms(c.gap_ms_max),
        verdict
    )
}

fn osl_line(o: &OslCheck) -> String {
    let agree = match o.max_abs_diff <= verdict::OSL_AGREE_TOKENS {
        true => "agree",
        false => "differ",
    };
    format!(
        "OSL: client and server {agree} over {} answers (client − server mean {:+.2}, at most \
         {} tokens)",
        o.answers, o.mean_diff, o.max_abs_diff
    )
}

fn isl_line(i: &IslCheck) -> String {
    let server = i.server.map_or("no count".into(), |n| format!("{n} tokens"));
    let templated = match (i.client_templated, i.server) {
        (Some(t), Some(s)) => {
            format!(
                ", {t} through the chat template (server − templated {:+})",
                s as i64 - t as i64
            )
        }
        (Some(t), None) => format!(", {t} through the chat template"),
        (None, _) => String::new(),
    };
    format!("ISL: server {server}; client {} raw{templated}", i.client_raw)
}

/// The probe prompt's client tokens, raw and (chat) through the template, against the
/// server's `prompt_tokens` of the first answer that had one.
fn isl_check(
    tok: &Tokenizer,
    api_type: &str,
    prompt: &str,
    plain: &[Exchange],
    streams: &[&Exchange],
) -> Option<IslCheck> {
    let client_raw = tok.count(prompt).ok()?;
    let client_templated = (api_type == ApiTypeName::Openai.as_str())
        .then(|| serde_json::json!([{ "role": "user", "content": prompt }]))
        .and_then(|messages| tok.render_chat(&messages))
        .and_then(|text| tok.count(&text).ok());
    let answers = plain.iter().chain(streams.iter().copied()).filter(|e| e.error.is_none());
    let server = answers.filter_map(|e| e.prompt_tokens).next();
    Some(IslCheck { server, client_raw, client_templated })
}
