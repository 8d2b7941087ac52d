//! Chat templates end to end: the client ISL of `messages` rows through a tokenizer folder's
//! `chat_template.jinja` (also inside a Hugging Face cache snapshot), `--chat-template FILE`,
//! and the note for text prompts sent to the chat endpoint.

use std::path::{Path, PathBuf};

use crate::support::{assets, dataset, isl_total, report_dir, show, stderr, stub, Run};
use loadgen_stubs::StubKind;

/// Rows of the messages dataset: (role, content) per message.
const CONVERSATIONS: [&[(&str, &str)]; 4] = [
    &[("user", "hello")],
    &[("system", "be brief"), ("user", "what is a token?")],
    &[("user", "one"), ("assistant", "two"), ("user", "three")],
    &[("user", "")],
];

fn tokenizer(name: &str) -> String {
    assets().join("tokenizers").join(name).display().to_string()
}

fn jinja_file() -> String {
    assets().join("tokenizers/char_jinja/chat_template.jinja").display().to_string()
}

/// Writes the messages dataset (one JSON object with `messages` per line) under the target
/// dir and returns its `--dataset` spec.
fn messages_dataset(name: &str) -> String {
    let path = crate::support::tmp_dir().join(format!("{name}.jsonl"));
    let lines: Vec<String> = CONVERSATIONS
        .iter()
        .map(|conv| {
            let messages: Vec<serde_json::Value> = conv
                .iter()
                .map(|(role, content)| serde_json::json!({"role": role, "content": content}))
                .collect();
            serde_json::json!({ "messages": messages }).to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.display().to_string()
}

/// Client ISL of the whole dataset under char_jinja's template with the char tokenizer:
/// `<s>` once, `<|role|>content</s>` per message (`</s>` one token, the rest one per
/// character), then `<|assistant|>` for the generation prompt.
fn jinja_isl_total() -> u64 {
    let per_conv = |conv: &[(&str, &str)]| -> u64 {
        let messages: u64 =
            conv.iter().map(|(role, content)| (role.len() + 4 + content.len() + 1) as u64).sum();
        1 + messages + "<|assistant|>".len() as u64
    };
    CONVERSATIONS.iter().map(|c| per_conv(c)).sum()
}

/// The same under char_chat's ChatML-style template.
fn chatml_isl_total() -> u64 {
    let per_conv = |conv: &[(&str, &str)]| -> u64 {
        let framed = |(role, content): &(&str, &str)| {
            format!("<|im_start|>{role}\n{content}<|im_end|>\n").chars().count() as u64
        };
        conv.iter().map(framed).sum::<u64>() + "<|im_start|>assistant\n".len() as u64
    };
    CONVERSATIONS.iter().map(|c| per_conv(c)).sum()
}

/// `samples` rows of `data` offline against `url` for `model`: one worker, 4 connections.
fn bench_for(model: &str, url: &str, dir: &Path, data: &str, samples: usize) -> Run {
    let run = Run::offline(url, dir).model(model).dataset_from(data);
    run.samples(samples as u64).workers(1).connections(4)
}

/// `bench_for` the model `test-model`.
fn bench(url: &str, dir: &Path, data: &str, samples: usize) -> Run {
    bench_for("test-model", url, dir, data, samples)
}

/// A tokenizer folder with `chat_template.jinja` (and a stale template in its
/// `tokenizer_config.json`) counts `messages` ISL with the jinja file; `--chat-template`
/// puts the same file over char_chat's own template and gives the same counts.
#[test]
fn messages_isl_is_counted_with_chat_template_jinja_and_the_flag() {
    let server = stub(StubKind::Echo, |_| {});
    let data = messages_dataset("tpl-messages");
    let rows = CONVERSATIONS.len();
    assert_ne!(jinja_isl_total(), chatml_isl_total(), "the two templates must differ");

    let dir = report_dir("tpl-jinja-folder");
    let out =
        bench(&server.url(), &dir, &data, rows).tokenizer_from(&tokenizer("char_jinja")).run();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(isl_total(&dir), jinja_isl_total());

    let dir = report_dir("tpl-chatml-folder");
    let out = bench(&server.url(), &dir, &data, rows).tokenizer_from(&tokenizer("char_chat")).run();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(isl_total(&dir), chatml_isl_total());

    let dir = report_dir("tpl-flag");
    let run = bench(&server.url(), &dir, &data, rows).tokenizer_from(&tokenizer("char_chat"));
    let out = run.arg("--chat-template").arg(jinja_file()).run();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(isl_total(&dir), jinja_isl_total(), "--chat-template replaces char_chat's");
}

/// Text prompts to `/v1/chat/completions`: one note at plan time giving the template's
/// tokens around an empty user message (`<s><|user|></s><|assistant|>`: 23); none for the
/// completions route.
#[test]
fn text_prompts_on_chat_get_one_note_with_the_template_tokens() {
    let server = stub(StubKind::Echo, |_| {});
    let dir = report_dir("tpl-note-chat");
    let out =
        bench(&server.url(), &dir, &dataset(), 20).tokenizer_from(&tokenizer("char_jinja")).run();
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("/v1/chat/completions")).collect();
    assert_eq!(notes.len(), 1, "one note: {err}");
    assert!(notes[0].starts_with("note: "), "{}", notes[0]);
    assert!(notes[0].contains("about 23 tokens per request"), "{}", notes[0]);
    assert!(notes[0].contains("chat_template.jinja"), "{}", notes[0]);

    let dir = report_dir("tpl-note-plain");
    let out = bench(&server.url(), &dir, &dataset(), 20).tokenizer_from(&tokenizer("char")).run();
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(err.contains("leaves that template out"), "no template, no number: {err}");
    assert!(!err.contains("tokens per request"), "{err}");

    let dir = report_dir("tpl-note-completions");
    let run = bench(&server.url(), &dir, &dataset(), 20).tokenizer_from(&tokenizer("char_jinja"));
    let out = run.args(["--api-type", "openai_completions"]).run();
    assert_eq!(out.status.code(), Some(0));
    assert!(!stderr(&out).contains("chat template"), "{}", stderr(&out));
}

/// A fake Hugging Face cache (`HF_HUB_CACHE`, set for the child only) whose snapshot holds
/// `tokenizer.json`, `tokenizer_config.json` (with its stale template) and
/// `chat_template.jinja`: the model id finds them, the jinja file wins, and `-v` says so.
#[test]
fn hf_cache_snapshot_chat_template_jinja_is_used() {
    let hub = crate::support::tmp_dir().join("tpl-hf-hub");
    let _ = std::fs::remove_dir_all(&hub);
    let repo = hub.join("models--org--tiny-chat");
    let snapshot = repo.join("snapshots/0123abcd");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "0123abcd").unwrap();
    for file in ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"] {
        let from: PathBuf = assets().join("tokenizers/char_jinja").join(file);
        std::fs::copy(from, snapshot.join(file)).unwrap();
    }
    let server = stub(StubKind::Echo, |_| {});
    let dir = report_dir("tpl-hf");
    let data = messages_dataset("tpl-hf-messages");
    let run = bench_for("org/tiny-chat", &server.url(), &dir, &data, CONVERSATIONS.len());
    let mut cmd = run.arg("-v").command();
    let out = cmd.env("HF_HUB_CACHE", &hub).env_remove("HF_HOME").output().unwrap();
    show(&out);
    let _ = std::fs::remove_dir_all(&hub);
    assert_eq!(out.status.code(), Some(0));
    let want = format!("chat template from {}", snapshot.join("chat_template.jinja").display());
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    assert_eq!(isl_total(&dir), jinja_isl_total());
}

/// A `--chat-template` file that is missing or does not compile stops the run before it
/// starts (exit 3), naming the file, with no panic.
#[test]
fn a_bad_chat_template_file_is_refused_naming_it() {
    let broken = crate::support::tmp_dir().join("tpl-broken.jinja");
    std::fs::write(&broken, "{% if messages %}unclosed").unwrap();
    let missing = crate::support::tmp_dir().join("tpl-missing.jinja");
    let _ = std::fs::remove_file(&missing);
    let server = stub(StubKind::Echo, |_| {});
    for file in [&broken, &missing] {
        let dir = report_dir("tpl-bad");
        let run = bench(&server.url(), &dir, &dataset(), 5).tokenizer_from(&tokenizer("char"));
        let out = run.arg("--chat-template").arg(file.display().to_string()).run();
        assert_eq!(out.status.code(), Some(3), "{}", file.display());
        let err = stderr(&out);
        assert!(err.contains(&file.display().to_string()), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!dir.join("performance").exists(), "refused before the run");
    }
    let _ = std::fs::remove_file(&broken);
}
