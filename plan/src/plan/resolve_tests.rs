//! Unit tests of plan resolution that need no flag: configurations given as YAML, and the
//! pure parts (endpoint URLs, warm connections, the chat template note). The tests that
//! parse a command line live beside the flags (src/cli/).

use super::resolve_here as resolve_plan;
use super::*;

fn asset(path: &str) -> String {
    format!("{}/../tests/assets/{path}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn warm_connections_follow_the_pattern_and_split_like_the_pool() {
    let poisson = LoadPattern::Poisson { target_qps: 20_000.0, seed: 42 };
    let conc = LoadPattern::Concurrency { n: 3000 };
    // (pattern, flag, workers, worker, share) -> warm connections of that worker
    let cases = [
        (LoadPattern::Offline, None, 2, 0, 500, 500),
        (conc, None, 2, 1, 1500, 1500),
        (poisson, None, 1, 0, 16_384, POISSON_WARM_CONNECTIONS_PER_WORKER_MAX),
        (poisson, None, 4, 3, 100, 100),
        (poisson, Some(0), 4, 0, 4096, 0),
        (poisson, Some(10), 4, 0, 4096, 3),
        (poisson, Some(10), 4, 2, 4096, 2),
        (LoadPattern::Offline, Some(10_000), 2, 1, 64, 64),
        (conc, Some(7), 1, 0, 3000, 7),
    ];
    for (pattern, flag, workers, worker, share, want) in cases {
        let got = warm_connections(pattern, flag, workers, worker, share);
        assert_eq!(got, want, "{pattern:?} {flag:?} worker {worker} of {workers}, share {share}");
    }
    let parts: Vec<usize> = (0..4).map(|i| split_share(10, 4, i)).collect();
    assert_eq!(parts, [3, 3, 2, 2]);
    assert_eq!(split_share(5, 0, 0), 5, "no workers counts as one");
}

fn endpoint(url: &str) -> Vec<EndpointUrl> {
    vec![EndpointUrl { url: url.to_string(), basic_auth: None }]
}

#[test]
fn base_urls_keep_their_prefix_lose_a_trailing_v1_and_take_ipv6_in_brackets() {
    for (given, want) in [
        ("http://h:8000", "http://h:8000"),
        ("http://h:8000/", "http://h:8000"),
        ("http://h:8000/v1", "http://h:8000"),
        ("http://h:8000/v1/", "http://h:8000"),
        ("http://h/prefix/v1", "http://h/prefix"),
        ("http://h/prefix", "http://h/prefix"),
        ("http://h/v10", "http://h/v10"),
        ("http://[::1]:8000/v1", "http://[::1]:8000"),
        ("http://[::1]", "http://[::1]"),
    ] {
        assert_eq!(parse_endpoint(given).unwrap().url, want, "{given}");
    }
    for bad in [
        "http://::1:8000",
        "http://[::1",
        "http://[zz]:1",
        "http://h:0",
        "http://h:70000",
        "http://h/x?a=1",
        "http://h#f",
        "ftp://h",
    ] {
        let err = parse_endpoint(bad).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{bad}: {err}");
    }
}

fn rows(rows: Vec<crate::dataset::Row>) -> Dataset {
    Dataset { name: "d".into(), rows }
}

fn text_row(prompt: &str, system: Option<&str>) -> crate::dataset::Row {
    crate::dataset::Row {
        prompt: Some(prompt.into()),
        system: system.map(str::to_string),
        ..Default::default()
    }
}

/// Text prompts sent to the chat route: the note says the ISL leaves the server's
/// template out and by how many tokens (the template around an empty user message).
#[test]
fn chat_template_note_gives_the_template_tokens_for_text_prompts_on_chat() {
    let tok = Tokenizer::load(&asset("tokenizers/char_jinja")).unwrap();
    let data = rows(vec![text_row("abc", None), text_row("de", Some("sys"))]);
    let url = endpoint("http://127.0.0.1:8000");
    let note = chat_template_note(ApiTypeName::Openai, &url, &data, Some(&tok)).unwrap();
    // <s><|user|></s><|assistant|>: two special tokens and 21 characters.
    assert!(note.contains("about 23 tokens per request"), "{note}");
    assert!(note.contains("char_jinja/chat_template.jinja"), "{note}");
    assert!(note.contains("/v1/chat/completions"), "{note}");
    assert!(note.contains("the system prompt of 1 row is left out too"), "{note}");
    let plain = Tokenizer::load(&asset("tokenizers/char")).unwrap();
    let note = chat_template_note(ApiTypeName::Openai, &url, &data, Some(&plain)).unwrap();
    assert!(note.contains("leaves that template out"), "{note}");
    assert!(note.contains("--chat-template FILE"), "{note}");
    assert!(!note.contains("tokens per request"), "no number without a template: {note}");
}

/// No note where nothing is left out: other routes, messages or token-id rows, no
/// tokenizer, the embedded stub or the null endpoint.
#[test]
fn chat_template_note_is_silent_where_the_isl_leaves_nothing_out() {
    let tok = Tokenizer::load(&asset("tokenizers/char_jinja")).unwrap();
    let text = rows(vec![text_row("abc", None)]);
    let url = endpoint("http://127.0.0.1:8000");
    for api in [ApiTypeName::OpenaiCompletions, ApiTypeName::Sglang] {
        assert_eq!(chat_template_note(api, &url, &text, Some(&tok)), None, "{api:?}");
    }
    assert_eq!(chat_template_note(ApiTypeName::Openai, &url, &text, None), None);
    assert_eq!(chat_template_note(ApiTypeName::Openai, &[], &text, Some(&tok)), None);
    let null = endpoint(NULL_ENDPOINT);
    assert_eq!(chat_template_note(ApiTypeName::Openai, &null, &text, Some(&tok)), None);
    let messages = serde_json::json!([{"role": "user", "content": "hi"}]);
    let structured = rows(vec![
        crate::dataset::Row { messages: Some(messages), ..Default::default() },
        crate::dataset::Row { token_ids: Some(vec![1, 2]), ..text_row("ab", None) },
    ]);
    assert_eq!(chat_template_note(ApiTypeName::Openai, &url, &structured, Some(&tok)), None);
}

#[test]
fn the_model_params_key_list_is_the_schemas_own() {
    // serde names every field it expects when it meets an unknown one.
    let err = serde_yaml_ng::from_str::<ModelParams>("not_a_key: 1").unwrap_err().to_string();
    let expected = err.split("expected one of ").nth(1).expect("serde lists the fields");
    let mut fields: Vec<&str> = expected
        .split(',')
        .map(|f| f.trim().trim_matches('`').split('`').next().unwrap())
        .collect();
    fields.retain(|f| !f.is_empty());
    let mut listed = MODEL_PARAMS_KEYS.to_vec();
    fields.sort_unstable();
    listed.sort_unstable();
    assert_eq!(listed, fields, "{err}");
}

#[test]
fn headers_and_ca_bundle_come_from_yaml_too() {
    let yaml = "type: offline\nmodel_params: {name: m}\nendpoint_config:\n  endpoints: \
                [\"http://127.0.0.1:9\"]\n  headers: [\"X-Team: infra\"]\n  ca_bundle: /x/ca.pem\n";
    let plan = resolve_plan(Config::from_yaml_str(yaml, "t.yaml").unwrap(), 0).unwrap();
    assert_eq!(plan.headers, [("X-Team".to_string(), "infra".to_string())]);
    let bundle = loadgen_worker::http::tls::Verify::CaBundle(PathBuf::from("/x/ca.pem"));
    assert_eq!(plan.tls_verify, bundle);
    assert!(plan.config_yaml.contains("- 'X-Team: infra'"), "{}", plan.config_yaml);
    assert!(plan.config_yaml.contains("ca_bundle: /x/ca.pem"), "{}", plan.config_yaml);
}

#[test]
fn a_parser_target_input_tokens_makes_token_id_prompts() {
    let path = format!("{}/../tests/assets/configs/token_ids.jsonl", env!("CARGO_MANIFEST_DIR"));
    let text = format!(
        "type: offline\nendpoint_config: {{api_type: openai_completions}}\ndatasets:\n  - \
         path: {path}\n    parser: {{input_tokens: input_tokens}}\n"
    );
    let plan = resolve_plan(Config::from_yaml_str(&text, "t.yaml").unwrap(), 0).unwrap();
    let ids: Vec<_> = plan.dataset.rows.iter().map(|r| r.token_ids.clone()).collect();
    assert_eq!(
        ids,
        [Some(vec![101, 102, 103]), Some(vec![104, 105]), Some(vec![106, 107, 108, 109])]
    );
    // The command-line form takes any target too.
    let spec = crate::dataset::DatasetSpec::parse("x.jsonl,parser.input_tokens=ids").unwrap();
    let other = spec.parser.unwrap().other;
    assert_eq!(other.get("input_tokens").map(String::as_str), Some("ids"));
    let bad = text.replace("{input_tokens: input_tokens}", "{label_text: label}");
    let err = resolve_plan(Config::from_yaml_str(&bad, "t.yaml").unwrap(), 0).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("datasets[0].parser.label_text"), "{err}");
}

#[test]
fn a_generation_config_override_is_merged_over_model_params() {
    let path = format!("{}/../tests/assets/datasets/dummy_1k.jsonl", env!("CARGO_MANIFEST_DIR"));
    let text = format!(
        "type: offline\nmodel_params:\n  max_new_tokens: 64\n  temperature: 0.5\n  \
         osl_distribution: {{type: uniform, min: 2, max: 9}}\ndatasets:\n  - path: {}\n    \
         parser: {{prompt: text_input}}\n    generation_config_override:\n      \
         max_new_tokens: 8\n      osl_distribution: {{max: 5}}\n",
        path
    );
    let plan = resolve_plan(Config::from_yaml_str(&text, "t.yaml").unwrap(), 0).unwrap();
    assert_eq!((plan.request.max_output_tokens, plan.request.temperature), (8, Some(0.5)));
    // Deep-merged: the override's max bounds the base's uniform draw from min 2.
    assert!(
        plan.row_output_tokens.iter().all(|n| (2..=5).contains(n)),
        "{:?}",
        plan.row_output_tokens
    );
    assert!(plan.row_output_tokens.contains(&2) && plan.row_output_tokens.contains(&5));
    let bad = text.replace("max_new_tokens: 8", "max_new_tokens: lots");
    let err = resolve_plan(Config::from_yaml_str(&bad, "t.yaml").unwrap(), 0).unwrap_err();
    assert!(err.to_string().contains("datasets[0].generation_config_override"), "{err}");
    assert_eq!(err.exit_code(), 2);
}

#[test]
fn null_drain_timeouts_resolve_to_an_unbounded_drain() {
    let text = "type: offline\nsettings:\n  drain:\n    warmup_timeout_s: null\n    \
                performance_timeout_s: null\n";
    let plan = resolve_plan(Config::from_yaml_str(text, "t.yaml").unwrap(), 0).unwrap();
    assert_eq!(
        (plan.drain_timeout_ms, plan.warmup.drain_timeout_ms),
        (DRAIN_FOREVER_MS, DRAIN_FOREVER_MS)
    );
    // An instant plus it does not overflow, as the coordinator adds it to now.
    let forever = std::time::Duration::from_millis(DRAIN_FOREVER_MS);
    assert!(std::time::Instant::now().checked_add(forever).is_some());
    let given = resolve_plan(Config::from_yaml_str("type: offline\n", "t.yaml").unwrap(), 0);
    assert_eq!(given.unwrap().drain_timeout_ms, 240_000);
}

#[test]
fn validate_yaml_accepts_what_the_reference_does_and_lists_what_a_run_refuses() {
    let text = "type: submission\nbenchmark_mode: online\nmodel_params: {name: m}\n\
                settings:\n  load_pattern: {type: poisson, target_qps: 5}\n  profiling: \
                {engine: vllm}\ndatasets:\n  - name: gpqa\n    type: accuracy\n";
    let config = Config::from_yaml_str(text, "t.yaml").unwrap();
    check_config(&config, &mut Vec::new()).unwrap();
    let notes = run_refusals(&config).join("\n");
    assert!(!notes.contains("type: submission"), "a submission runs here: {notes}");
    assert!(!notes.contains("profiling"), "profiling runs here: {notes}");
    let eval = Config::from_yaml_str("type: eval\nmodel_params: {name: m}\n", "t.yaml").unwrap();
    check_config(&eval, &mut Vec::new()).unwrap();
    assert!(run_refusals(&eval).join("\n").contains("type: eval"));
    assert_eq!(resolve_plan(eval, 0).unwrap_err().exit_code(), 2);
}

#[test]
fn validate_yaml_refuses_what_a_run_would_refuse() {
    let bad = [
        "type: offline\nendpoint_config: {api_type: sglang}\nmodel_params:\n  \
         chat_template_kwargs: {a: 1}\n",
        "type: offline\nmodel_params:\n  osl_distribution: {type: normal, mean: 9}\n",
        "type: offline\nmodel_params:\n  extra_body: [1]\n",
    ];
    for text in bad {
        let config = Config::from_yaml_str(text, "t.yaml").unwrap();
        assert_eq!(check_config(&config, &mut Vec::new()).unwrap_err().exit_code(), 2, "{text}");
    }
    let good = "type: offline\nmodel_params:\n  osl_distribution:\n    type: normal\n    \
                mean: 1000\n    std: 200\n    min: 512\n    max: 2048\n";
    check_config(&Config::from_yaml_str(good, "t.yaml").unwrap(), &mut Vec::new()).unwrap();
}
