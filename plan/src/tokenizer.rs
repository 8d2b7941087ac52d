//! Client tokenizer: local loading only (a `tokenizer.json`, a folder holding one, or a
//! Hugging Face id found in the local HF cache), and the ISL counting rules of anchor §6.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::error::AppError;
use crate::row::Row;

/// A loaded tokenizer plus its chat template: the folder's (`chat_template.jinja`, else
/// `tokenizer_config.json`'s `chat_template`) or one given with `--chat-template`.
///
/// Counting uses only single-input calls: batch calls start rayon threads, and no thread
/// may exist in the coordinator before the fork (DESIGN.md).
#[derive(Debug, Clone)]
pub struct Tokenizer {
    inner: Arc<tokenizers::Tokenizer>,
    /// The compiled chat template (`None`: no template, or one that does not compile,
    /// which the reference also treats as a rendering failure).
    chat: Option<Arc<minijinja::Environment<'static>>>,
    /// The file the chat template was read from (`chat_template.jinja`, the
    /// `tokenizer_config.json`, or the `--chat-template` file).
    chat_template_source: Option<PathBuf>,
    bos_token: Option<String>,
    eos_token: Option<String>,
    source: PathBuf,
}

/// Name of the chat template inside its minijinja environment.
const CHAT_TEMPLATE_NAME: &str = "chat_template";

/// A minijinja environment set up as Hugging Face's (`trim_blocks`, `lstrip_blocks`, loop
/// controls, `raise_exception`, Python string and dict methods).
fn chat_environment(template: String) -> Option<minijinja::Environment<'static>> {
    chat_environment_checked(template).ok()
}

/// `chat_environment`, keeping the compile error.
fn chat_environment_checked(
    template: String,
) -> Result<minijinja::Environment<'static>, minijinja::Error> {
    let mut env = minijinja::Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<String, minijinja::Error> {
        Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
    });
    env.add_template_owned(CHAT_TEMPLATE_NAME, template)?;
    Ok(env)
}

impl Tokenizer {
    /// Loads a tokenizer from a `tokenizer.json` file, a folder holding one, or a Hugging
    /// Face id in the local cache. Never downloads; a failure is a setup error (exit 3)
    /// that names every place tried.
    pub fn load(spec: &str) -> Result<Tokenizer, AppError> {
        let candidates = candidate_files(spec);
        for file in &candidates {
            if file.is_file() {
                return Self::load_file(file);
            }
        }
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        Err(AppError::Setup(format!(
            "tokenizer {spec:?} not found locally (tried {}); give a tokenizer.json file, \
             a folder holding one, or a model id present in the local hugging face cache",
            tried.join(", ")
        )))
    }

    /// Loads one `tokenizer.json`; the chat template and special tokens come from the files
    /// beside it (`folder_chat_template`), if any.
    pub fn load_file(file: &Path) -> Result<Tokenizer, AppError> {
        let inner = tokenizers::Tokenizer::from_file(file).map_err(|e| {
            AppError::Setup(format!("cannot load tokenizer {}: {e}", file.display()))
        })?;
        let folder = file.parent().unwrap_or(Path::new("."));
        let config_path = folder.join("tokenizer_config.json");
        let config = match config_path.is_file() {
            true => read_config(&config_path)?,
            false => Value::Null,
        };
        let template = folder_chat_template(folder, &config, &config_path)?;
        let (template, chat_template_source) = template.unzip();
        Ok(Tokenizer {
            inner: Arc::new(inner),
            chat_template_source,
            chat: template.and_then(chat_environment).map(Arc::new),
            bos_token: special_token(&config, "bos_token"),
            eos_token: special_token(&config, "eos_token"),
            source: file.to_path_buf(),
        })
    }

    /// The `tokenizer.json` this was loaded from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The file the chat template was read from; `None`: no chat template is known.
    pub fn chat_template_source(&self) -> Option<&Path> {
        self.chat_template_source.as_deref()
    }

    /// Replaces the folder's chat template with the jinja file `file` (`--chat-template`),
    /// as the server's `--chat-template` replaces the model's. Unlike a folder's template,
    /// which the reference treats as a render failure when it does not compile, a file the
    /// user names must compile: one that does not, or cannot be read, is a setup error
    /// (exit 3) naming it.
    pub fn override_chat_template(&mut self, file: &Path) -> Result<(), AppError> {
        let text = std::fs::read_to_string(file).map_err(|e| {
            AppError::Setup(format!(
                "cannot read chat template {}: {e}; give --chat-template a jinja file that \
                 exists",
                file.display()
            ))
        })?;
        let env = chat_environment_checked(text).map_err(|e| {
            AppError::Setup(format!(
                "chat template {} does not compile: {e:#}; fix the template or give \
                 another --chat-template file",
                file.display()
            ))
        })?;
        self.chat = Some(Arc::new(env));
        self.chat_template_source = Some(file.to_path_buf());
        Ok(())
    }

    /// Tokens the chat template adds around a text prompt: the template rendered on one
    /// empty user message with a generation prompt, counted. `None` when there is no template
    /// or it does not render.
    pub fn chat_template_overhead_tokens(&self) -> Option<u32> {
        let empty = serde_json::json!([{"role": "user", "content": ""}]);
        self.count(&self.render_chat(&empty)?).ok()
    }

    /// Tokens in `text`, without special tokens: `encode`'s count, by the cheapest route
    /// that gives it (`count_tokens`).
    pub fn count(&self, text: &str) -> Result<u32, String> {
        let n = count_tokens(&self.inner, text).map_err(|e| format!("tokenizer failed: {e}"))?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// The ISL of a row (anchor §6) without chat template kwargs; see `count_row_with`.
    #[cfg(test)]
    pub fn count_row(&self, row: &Row) -> Result<u32, String> {
        self.count_row_with(row, None)
    }

    /// The ISL of a row (anchor §6): token ids by length; `messages` through the chat
    /// template with a generation prompt, the row's `tools` and `tool_choice`, its own
    /// `chat_template` when it has one, and `chat_template_kwargs` (falling back to the JSON
    /// of the messages and tools when there is no template or it fails), as the reference's
    /// `_token_count_prompt`; a text prompt raw, without system prompt or template. A row
    /// with none of them counts 0.
    pub fn count_row_with(&self, row: &Row, kwargs: Option<&Value>) -> Result<u32, String> {
        if let Some(ids) = &row.token_ids {
            return Ok(u32::try_from(ids.len()).unwrap_or(u32::MAX));
        }
        if let Some(messages) = row.messages.as_ref().filter(|m| !is_empty_list(m)) {
            let prompt = ChatPrompt {
                messages,
                tools: row.request_column("tools"),
                tool_choice: row.request_column("tool_choice"),
                template: row.request_column("chat_template").and_then(Value::as_str),
                kwargs,
            };
            return match self.render_chat_prompt(&prompt) {
                Some(text) => self.count(&text),
                None => {
                    let mut fallback = serde_json::json!({ "messages": messages });
                    if let Some(tools) = prompt.tools {
                        fallback["tools"] = tools.clone();
                    }
                    self.count(&python_json(&fallback))
                }
            };
        }
        match &row.prompt {
            Some(prompt) => self.count(prompt),
            None => Ok(0),
        }
    }

    /// A deep copy for a tokenizer thread, so threads share no model caches.
    pub fn clone_for_thread(&self) -> Tokenizer {
        Tokenizer { inner: Arc::new((*self.inner).clone()), ..self.clone() }
    }

    /// Renders `messages` with the chat template and a generation prompt, as Hugging Face
    /// does; `None` when there is no template or it fails to render.
    pub fn render_chat(&self, messages: &Value) -> Option<String> {
        let prompt =
            ChatPrompt { messages, tools: None, tool_choice: None, template: None, kwargs: None };
        self.render_chat_prompt(&prompt)
    }

    /// Renders a chat prompt as Hugging Face's `apply_chat_template` does: the tokenizer's
    /// special tokens, overridden by `kwargs`, then the messages, tools, tool choice and
    /// `add_generation_prompt`, which `kwargs` cannot override; the prompt's own template in
    /// place of the tokenizer's when it has one. `None` when there is no template or it fails.
    pub fn render_chat_prompt(&self, prompt: &ChatPrompt<'_>) -> Option<String> {
        let mut ctx = serde_json::Map::new();
        ctx.insert("bos_token".into(), self.bos_token.clone().unwrap_or_default().into());
        ctx.insert("eos_token".into(), self.eos_token.clone().unwrap_or_default().into());
        if let Some(Value::Object(kwargs)) = prompt.kwargs {
            ctx.extend(kwargs.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        ctx.insert("messages".into(), prompt.messages.clone());
        ctx.insert("add_generation_prompt".into(), true.into());
        if let Some(tools) = prompt.tools {
            ctx.insert("tools".into(), tools.clone());
        }
        if let Some(choice) = prompt.tool_choice {
            ctx.insert("tool_choice".into(), choice.clone());
        }
        let ctx = minijinja::Value::from_serialize(&ctx);
        match prompt.template {
            Some(text) => {
                let env = chat_environment(text.to_string())?;
                env.get_template(CHAT_TEMPLATE_NAME).ok()?.render(ctx).ok()
            }
            None => {
                let env = self.chat.as_deref()?;
                env.get_template(CHAT_TEMPLATE_NAME).ok()?.render(ctx).ok()
            }
        }
    }
}

/// What a messages row renders through a chat template for its client ISL.
#[derive(Debug, Clone, Copy)]
pub struct ChatPrompt<'a> {
    pub messages: &'a Value,
    pub tools: Option<&'a Value>,
    pub tool_choice: Option<&'a Value>,
    /// The row's own template text (a `chat_template` column), in place of the tokenizer's.
    pub template: Option<&'a str>,
    /// `model_params.chat_template_kwargs` (chat API only), as template variables.
    pub kwargs: Option<&'a Value>,
}

/// The tokens `encode(text, false)` gives, without building an `Encoding`: added tokens
/// split out and the rest normalized, pre-tokenized, then each piece through the model, with
/// no offsets, no ids and no token strings kept (perf `loadgen-perf count-tokens` measured
/// it against `encode` and `encode_fast`; docs/PERF.md). Truncation and padding change
/// counts only inside `encode`, so a tokenizer that sets either takes `encode_fast`.
pub fn count_tokens(tok: &tokenizers::Tokenizer, text: &str) -> tokenizers::Result<usize> {
    use tokenizers::{Model, OffsetReferential, OffsetType, PreTokenizer};
    if tok.get_truncation().is_some() || tok.get_padding().is_some() {
        return Ok(tok.encode_fast(text, false)?.len());
    }
    let mut pieces = tok.get_added_vocabulary().extract_and_normalize(tok.get_normalizer(), text);
    if let Some(pre) = tok.get_pre_tokenizer() {
        pre.pre_tokenize(&mut pieces)?;
    }
    let model = tok.get_model();
    let mut tokens = 0;
    for (piece, _, added) in pieces.get_splits(OffsetReferential::Normalized, OffsetType::None) {
        tokens += match added {
            Some(added) => added.len(),
            None => model.tokenize(piece)?.len(),
        };
    }
    Ok(tokens)
}

fn is_empty_list(v: &Value) -> bool {
    matches!(v, Value::Array(a) if a.is_empty())
}

/// Where a spec may name a `tokenizer.json`, in the order tried.
fn candidate_files(spec: &str) -> Vec<PathBuf> {
    let path = Path::new(spec);
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = vec![path.join("tokenizer.json")];
    if path.is_dir() || spec.starts_with('.') || spec.starts_with('/') {
        return out;
    }
    if let Some(repo) =
        hf_cache_dir().map(|hub| hub.join(format!("models--{}", spec.replace('/', "--"))))
    {
        out.extend(hf_snapshot_files(&repo));
    }
    out
}

/// The local Hugging Face hub cache: `$HF_HUB_CACHE`, `$HF_HOME/hub`, or
/// `~/.cache/huggingface/hub`.
fn hf_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HF_HUB_CACHE") {
        return Some(PathBuf::from(dir));
    }
    if let Some(home) = std::env::var_os("HF_HOME") {
        return Some(PathBuf::from(home).join("hub"));
    }
    let home = std::env::var_os("HOME")?;
    Some(PathBuf::from(home).join(".cache/huggingface/hub"))
}

/// The repo's `tokenizer.json` candidates: the snapshot `refs/main` names first, then every
/// other snapshot in name order.
fn hf_snapshot_files(repo: &Path) -> Vec<PathBuf> {
    let snapshots = repo.join("snapshots");
    let mut out = Vec::new();
    if let Ok(main) = std::fs::read_to_string(repo.join("refs/main")) {
        out.push(snapshots.join(main.trim()).join("tokenizer.json"));
    }
    let mut others: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path().join("tokenizer.json")).collect())
        .unwrap_or_default();
    others.sort();
    for p in others {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    if out.is_empty() {
        out.push(snapshots.join("<revision>").join("tokenizer.json"));
    }
    out
}

fn read_config(path: &Path) -> Result<Value, AppError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| AppError::Setup(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| AppError::Setup(format!("cannot parse {}: {e}", path.display())))
}

/// Where transformers keeps a folder's chat template in a file of its own (transformers 5
/// writes templates only there).
const CHAT_TEMPLATE_FILE: &str = "chat_template.jinja";

/// Named templates beside it, one `NAME.jinja` each.
const CHAT_TEMPLATE_DIR: &str = "additional_chat_templates";

/// The folder's chat template and the file it came from, resolved as transformers'
/// `from_pretrained` and `apply_chat_template` do: template files (`chat_template.jinja` as
/// "default", `additional_chat_templates/NAME.jinja` as NAME), when any exist, replace
/// `tokenizer_config.json`'s `chat_template` entirely; of named templates the "default" one
/// is used (no row carries tools, so "tool_use" never applies), and a set without one is no
/// template, as transformers refuses to choose.
fn folder_chat_template(
    folder: &Path,
    config: &Value,
    config_path: &Path,
) -> Result<Option<(String, PathBuf)>, AppError> {
    // transformers reads `chat_template.jinja` into "default" first and the named files
    // after it, so a named `default.jinja` overwrites it.
    let default = folder.join(CHAT_TEMPLATE_DIR).join("default.jinja");
    if default.is_file() {
        return Ok(Some((read_template(&default)?, default)));
    }
    let file = folder.join(CHAT_TEMPLATE_FILE);
    if file.is_file() {
        return Ok(Some((read_template(&file)?, file)));
    }
    if has_named_template_files(&folder.join(CHAT_TEMPLATE_DIR)) {
        return Ok(None);
    }
    Ok(config_chat_template(config).map(|t| (t, config_path.to_path_buf())))
}

fn read_template(path: &Path) -> Result<String, AppError> {
    std::fs::read_to_string(path).map_err(|e| {
        AppError::Setup(format!(
            "cannot read chat template {}: {e}; make it a readable UTF-8 file or remove it",
            path.display()
        ))
    })
}

/// Whether `dir` holds any `*.jinja` file (each a named template).
fn has_named_template_files(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.filter_map(|e| e.ok()).any(|e| {
        let path = e.path();
        path.is_file() && path.extension().is_some_and(|x| x == "jinja")
    })
}

/// `tokenizer_config.json`'s `chat_template`: a string, or the "default" entry of a list of
/// named templates (`None` when the list has no "default").
fn config_chat_template(config: &Value) -> Option<String> {
    match config.get("chat_template")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => items
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
            .and_then(|t| t.get("template"))
            .and_then(Value::as_str)
            .map(str::to_string),
        _ => None,
    }
}

/// A special token given as a string or as `{"content": …}`.
fn special_token(config: &Value, key: &str) -> Option<String> {
    match config.get(key)? {
        Value::String(s) => Some(s.clone()),
        v => v.get("content").and_then(Value::as_str).map(str::to_string),
    }
}

/// JSON as Python's `json.dumps` writes it by default (`", "` and `": "` separators,
/// non-ASCII escaped), so a fallback count matches the reference's; DEL stays raw, as this
/// count has always written it (`loadgen_py::json::Escape::AsciiExceptDel`).
pub fn python_json(value: &Value) -> String {
    loadgen_py::json::dumps(value, loadgen_py::json::Escape::AsciiExceptDel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asset(path: &str) -> String {
        format!("{}/../tests/assets/tokenizers/{path}", env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn char_tokenizer_counts_one_token_per_character() {
        for spec in [asset("char"), asset("char/tokenizer.json")] {
            let tok = Tokenizer::load(&spec).unwrap();
            assert_eq!(tok.count("hello world").unwrap(), 11);
            assert_eq!(tok.count("").unwrap(), 0);
            assert_eq!(tok.count("tab\there\n").unwrap(), 9);
            // Unknown characters are still one token each.
            assert_eq!(tok.count("héllo").unwrap(), 5);
            assert_eq!(tok.chat_template_source(), None);
        }
    }

    #[test]
    fn count_row_follows_the_isl_rules() {
        let tok = Tokenizer::load(&asset("char")).unwrap();
        let prompt = Row {
            prompt: Some("abc".into()),
            system: Some("long system".into()),
            ..Row::default()
        };
        assert_eq!(tok.count_row(&prompt).unwrap(), 3);
        let ids = Row { prompt: Some("abc".into()), token_ids: Some(vec![7; 5]), ..Row::default() };
        assert_eq!(tok.count_row(&ids).unwrap(), 5);
        assert_eq!(tok.count_row(&Row::default()).unwrap(), 0);
        // No chat template: the JSON of the messages is counted, as Python writes it.
        let messages = serde_json::json!([{"role": "user", "content": "hi"}]);
        let row = Row { messages: Some(messages.clone()), ..Row::default() };
        let json = python_json(&serde_json::json!({ "messages": messages }));
        assert_eq!(json, r#"{"messages": [{"content": "hi", "role": "user"}]}"#);
        assert_eq!(tok.count_row(&row).unwrap(), json.chars().count() as u32);
    }

    #[test]
    fn chat_template_renders_with_a_generation_prompt() {
        let tok = Tokenizer::load(&asset("char_chat")).unwrap();
        assert!(tok.chat_template_source().unwrap().ends_with("char_chat/tokenizer_config.json"));
        let messages = serde_json::json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"}
        ]);
        let text = tok.render_chat(&messages).unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n\
             <|im_start|>assistant\n"
        );
        let row = Row { messages: Some(messages), ..Row::default() };
        assert_eq!(tok.count_row(&row).unwrap(), text.chars().count() as u32);
        let copy = tok.clone_for_thread();
        assert_eq!(copy.count("hello").unwrap(), 5);
    }

    #[test]
    fn hugging_face_style_templates_render() {
        let dir = std::env::temp_dir().join(format!("llm-loadgen-hftpl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(asset("char/tokenizer.json"), dir.join("tokenizer.json")).unwrap();
        let template = concat!(
            "{% for m in messages %}\n",
            "{% if m['role'] not in ['user', 'system'] %}",
            "{{ raise_exception('bad role ' + m['role']) }}{% endif %}\n",
            "[{{ m['role'].upper() }}] {{ m['content'].strip() }}\n",
            "{% if loop.index > 1 %}{% break %}{% endif %}\n",
            "{% endfor %}"
        );
        let config =
            serde_json::json!({ "chat_template": [{"name": "default", "template": template}] });
        std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
        let tok = Tokenizer::load(&dir.display().to_string());
        std::fs::remove_dir_all(&dir).unwrap();
        let tok = tok.unwrap();
        let ok = serde_json::json!([
            {"role": "system", "content": "  be brief "},
            {"role": "user", "content": "hi"},
            {"role": "user", "content": "never reached"}
        ]);
        assert_eq!(tok.render_chat(&ok).as_deref(), Some("[SYSTEM] be brief\n[USER] hi\n"));
        // raise_exception fails the render; the row falls back to the JSON count.
        let bad = serde_json::json!([{"role": "tool", "content": "x"}]);
        assert_eq!(tok.render_chat(&bad), None);
        let row = Row { messages: Some(bad.clone()), ..Row::default() };
        let json = python_json(&serde_json::json!({ "messages": bad }));
        assert_eq!(tok.count_row(&row).unwrap(), json.chars().count() as u32);
    }

    /// A scratch folder holding a copy of the char tokenizer; removed when dropped, so a
    /// failing assertion leaves nothing behind.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("llm-loadgen-tpl-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::copy(asset("char/tokenizer.json"), dir.join("tokenizer.json")).unwrap();
            Scratch(dir)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
            path
        }

        fn load(&self) -> Tokenizer {
            Tokenizer::load(&self.0.display().to_string()).unwrap()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn user(content: &str) -> Value {
        serde_json::json!([{"role": "user", "content": content}])
    }

    /// transformers 5 writes the template only to `chat_template.jinja`; when both it and
    /// `tokenizer_config.json`'s `chat_template` exist, the file wins.
    #[test]
    fn chat_template_jinja_beside_tokenizer_json_wins_over_the_config() {
        let tok = Tokenizer::load(&asset("char_jinja")).unwrap();
        let source = tok.chat_template_source().unwrap();
        assert!(source.ends_with("char_jinja/chat_template.jinja"), "{}", source.display());
        // bos/eos from tokenizer_config.json; trim_blocks drops the newlines after the tags.
        let text = tok.render_chat(&user("hi")).unwrap();
        assert_eq!(text, "<s><|user|>hi</s><|assistant|>");
        assert!(!text.contains("STALE"), "the config's template was used: {text}");
        let row = Row { messages: Some(user("hi")), ..Row::default() };
        // <s> and </s> are one token each, the rest one per character.
        assert_eq!(tok.count_row(&row).unwrap(), 2 + "<|user|>hi<|assistant|>".len() as u32);

        let only_jinja = Scratch::new("only-jinja");
        only_jinja.write("chat_template.jinja", "{{ messages[0]['content'] }}!");
        let tok = only_jinja.load();
        assert_eq!(tok.render_chat(&user("yo")).as_deref(), Some("yo!"));
    }

    /// A list of named templates in `tokenizer_config.json` uses its "default" entry, as
    /// transformers does; a list without one is no template (transformers refuses to pick),
    /// so messages fall back to the JSON count.
    #[test]
    fn list_form_config_templates_use_the_default_entry() {
        let dir = Scratch::new("list");
        let named = |names: &[&str]| {
            let list: Vec<Value> = names
                .iter()
                .map(|n| serde_json::json!({"name": n, "template": format!("{n}:{{{{ messages[0].content }}}}")}))
                .collect();
            dir.write(
                "tokenizer_config.json",
                &serde_json::json!({ "chat_template": list }).to_string(),
            );
            dir.load()
        };
        let tok = named(&["tool_use", "default", "rag"]);
        assert_eq!(tok.render_chat(&user("x")).as_deref(), Some("default:x"));
        let tok = named(&["tool_use", "rag"]);
        assert_eq!(tok.chat_template_source(), None);
        assert_eq!(tok.render_chat(&user("x")), None);
        let row = Row { messages: Some(user("x")), ..Row::default() };
        let json = python_json(&serde_json::json!({ "messages": user("x") }));
        assert_eq!(tok.count_row(&row).unwrap(), json.len() as u32);
    }

    /// `additional_chat_templates/NAME.jinja` files replace the config's templates as
    /// `chat_template.jinja` does; `default.jinja` among them is the one used.
    #[test]
    fn additional_template_files_replace_the_config_template() {
        let dir = Scratch::new("additional");
        let config = serde_json::json!({ "chat_template": "config:{{ messages[0].content }}" });
        dir.write("tokenizer_config.json", &config.to_string());
        assert_eq!(dir.load().render_chat(&user("a")).as_deref(), Some("config:a"));
        dir.write("additional_chat_templates/tool_use.jinja", "tools:{{ messages[0].content }}");
        assert_eq!(dir.load().chat_template_source(), None, "named files without a default");
        let default =
            dir.write("additional_chat_templates/default.jinja", "file:{{ messages[0].content }}");
        let tok = dir.load();
        assert_eq!(tok.render_chat(&user("a")).as_deref(), Some("file:a"));
        assert_eq!(tok.chat_template_source(), Some(default.as_path()));
        // transformers reads the named default after chat_template.jinja: it wins.
        let top = dir.write("chat_template.jinja", "top:{{ messages[0].content }}");
        assert_eq!(dir.load().render_chat(&user("a")).as_deref(), Some("file:a"));
        std::fs::remove_file(&default).unwrap();
        let tok = dir.load();
        assert_eq!(tok.render_chat(&user("a")).as_deref(), Some("top:a"));
        assert_eq!(tok.chat_template_source(), Some(top.as_path()));
    }

    /// `--chat-template FILE` replaces the folder's template (both kinds) for ISL counting.
    #[test]
    fn chat_template_flag_file_overrides_the_folder_template() {
        let dir = Scratch::new("flag");
        let file = dir.write("server.jinja", "[{{ messages[0]['content'] }}]{{ eos_token }}");
        for folder in ["char_chat", "char_jinja", "char"] {
            let mut tok = Tokenizer::load(&asset(folder)).unwrap();
            tok.override_chat_template(&file).unwrap();
            assert_eq!(tok.chat_template_source(), Some(file.as_path()), "{folder}");
            let text = tok.render_chat(&user("hey")).unwrap();
            assert_eq!(text, "[hey]</s>", "{folder}");
            let row = Row { messages: Some(user("hey")), ..Row::default() };
            assert_eq!(tok.count_row(&row).unwrap(), 6, "{folder}: </s> is one token");
        }
    }

    /// A `--chat-template` file that does not exist or does not compile is a setup error
    /// (exit 3, as other tokenizer errors) naming the file, and leaves the template as it was.
    #[test]
    fn a_missing_or_broken_chat_template_file_is_refused_naming_it() {
        let dir = Scratch::new("bad");
        let missing = dir.0.join("missing.jinja");
        let broken = dir.write("broken.jinja", "{% for message in messages %}{{ message");
        for (file, what) in [(&missing, "cannot read chat template"), (&broken, "does not compile")]
        {
            let mut tok = Tokenizer::load(&asset("char_chat")).unwrap();
            let err = tok.override_chat_template(file).unwrap_err();
            let AppError::Setup(msg) = &err else { panic!("{err:?}") };
            assert!(msg.contains(&file.display().to_string()), "{msg}");
            assert!(msg.contains(what) && msg.contains("--chat-template"), "{msg}");
            assert_eq!(err.exit_code(), 3);
            let source = tok.chat_template_source().unwrap();
            assert!(source.ends_with("char_chat/tokenizer_config.json"), "unchanged");
        }
    }

    /// The note's number: the template's tokens around an empty user message, with the
    /// generation prompt; nothing without a template.
    #[test]
    fn template_overhead_counts_the_template_around_an_empty_user_message() {
        let jinja = Tokenizer::load(&asset("char_jinja")).unwrap();
        assert_eq!(
            jinja.chat_template_overhead_tokens(),
            Some(2 + "<|user|><|assistant|>".len() as u32)
        );
        let chat = Tokenizer::load(&asset("char_chat")).unwrap();
        let framed = "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n";
        assert_eq!(chat.chat_template_overhead_tokens(), Some(framed.len() as u32));
        assert_eq!(Tokenizer::load(&asset("char")).unwrap().chat_template_overhead_tokens(), None);
    }

    /// The cheap count must be `encode`'s on every kind of text: ASCII, accents, CJK, emoji,
    /// whitespace runs, added special tokens, empty.
    #[test]
    fn the_cheap_count_equals_encode_on_varied_text() {
        let texts = [
            "",
            "hello world",
            "  leading and   inner   spaces\n\n\ttabs",
            "Héllo, wörld! Ça va? naïve café",
            "日本語のテキストと中文文本",
            "emoji 🎉🚀 and ZWJ 👩‍👩‍👧 sequences",
            "<|endoftext|>special<|endoftext|> tokens",
            "numbers 1234567890 3.14159 -42 1e10",
            "code: fn main() { println!(\"{}\", x); }",
            "The quick brown fox jumps over the lazy dog. ",
        ];
        for name in ["bpe2k", "char"] {
            let tok = Tokenizer::load(&asset(name)).unwrap();
            let dataset = std::fs::read_to_string(format!(
                "{}/../tests/assets/datasets/dummy_1k.jsonl",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap();
            let long = texts.concat().repeat(20);
            let lines = dataset.lines().take(200);
            for text in texts.iter().copied().chain([long.as_str()]).chain(lines) {
                let want = tok.inner.encode(text, false).unwrap().len();
                assert_eq!(count_tokens(&tok.inner, text).unwrap(), want, "{name}: {text:?}");
            }
        }
        let bpe = Tokenizer::load(&asset("bpe2k")).unwrap();
        let prompt = "Write a short story about machine learning (case 0)";
        let n = bpe.count(prompt).unwrap() as usize;
        assert!(n < prompt.len() / 3, "a BPE trained on the dataset merges its words: {n} tokens");
    }

    #[test]
    fn unknown_tokenizer_is_a_setup_error_naming_what_was_tried() {
        let err = Tokenizer::load("no-such-org/no-such-model").unwrap_err();
        let AppError::Setup(msg) = &err else { panic!("{err:?}") };
        assert!(msg.contains("no-such-org/no-such-model/tokenizer.json"), "{msg}");
        assert!(msg.contains("models--no-such-org--no-such-model"), "{msg}");
        assert_eq!(err.exit_code(), 3);
        let dir = std::env::temp_dir().join(format!("llm-loadgen-badtok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tokenizer.json"), "{not json").unwrap();
        let err = Tokenizer::load(&dir.display().to_string()).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(&err, AppError::Setup(m) if m.contains("cannot load tokenizer")), "{err}");
    }

    #[test]
    fn hf_cache_snapshot_is_found() {
        let hub = std::env::temp_dir().join(format!("llm-loadgen-hub-{}", std::process::id()));
        let snap = hub.join("models--org--tiny/snapshots/abc123");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(hub.join("models--org--tiny/refs")).unwrap();
        std::fs::write(hub.join("models--org--tiny/refs/main"), "abc123\n").unwrap();
        std::fs::copy(asset("char/tokenizer.json"), snap.join("tokenizer.json")).unwrap();
        let found = hf_snapshot_files(&hub.join("models--org--tiny"));
        assert_eq!(found[0], snap.join("tokenizer.json"));
        let tok = Tokenizer::load_file(&found[0]).unwrap();
        std::fs::remove_dir_all(&hub).unwrap();
        assert_eq!(tok.count("abc").unwrap(), 3);
    }

    #[test]
    fn a_messages_rows_isl_renders_with_its_tools_template_and_the_kwargs() {
        let dir = Scratch::new("tools");
        dir.write(
            "chat_template.jinja",
            "{% for m in messages %}{{ m.content }}{% endfor %}\
             {% if tools %}|tools:{{ tools | length }}{% endif %}\
             {% if tool_choice %}|choice:{{ tool_choice }}{% endif %}\
             {% if enable_thinking is defined and not enable_thinking %}|nothink{% endif %}\
             {% if add_generation_prompt %}|gen{% endif %}",
        );
        let tok = dir.load();
        let tools = serde_json::json!([{"type": "function"}, {"type": "function"}]);
        let row = Row {
            messages: Some(user("hi")),
            request_columns: vec![
                ("tools".into(), tools.clone()),
                ("tool_choice".into(), serde_json::json!("auto")),
            ],
            ..Row::default()
        };
        let rendered = "hi|tools:2|choice:auto|gen";
        assert_eq!(tok.count_row(&row).unwrap(), rendered.len() as u32);
        let kwargs = serde_json::json!({"enable_thinking": false, "add_generation_prompt": false});
        let with = tok.count_row_with(&row, Some(&kwargs)).unwrap();
        // kwargs are template variables, but cannot turn the generation prompt off.
        assert_eq!(with, (rendered.len() + "|nothink".len()) as u32);
        let own = Row {
            request_columns: vec![(
                "chat_template".into(),
                serde_json::json!("<{{ messages[0].content }}>"),
            )],
            ..row.clone()
        };
        assert_eq!(tok.count_row(&own).unwrap(), 4, "the row's template replaces the folder's");
        let broken = Row {
            request_columns: vec![
                ("tools".into(), tools.clone()),
                ("chat_template".into(), serde_json::json!("{% if %}")),
            ],
            ..row
        };
        let json = python_json(&serde_json::json!({"messages": user("hi"), "tools": tools}));
        assert_eq!(tok.count_row(&broken).unwrap(), json.chars().count() as u32, "json fallback");
    }
}
