//! The integration tests of `llm-loadgen`, as one test binary (ripgrep's layout): each file
//! is a module under the area it tests, and `support` holds what they share.
//! `cargo test --test tests run::e2e::` runs one file's tests.

mod support;

/// The command line without a benchmark: usage errors, YAML, `--json`, docs against `--help`.
mod cli {
    mod commands;
    mod config_schema;
    mod docs_tidy;
    mod flag_spellings;
    mod json_output;
    mod newcomer;
}

/// Benchmark runs end to end: load patterns, events, requests, timing, faults, accuracy.
mod run {
    mod accuracy_run;
    mod agentic;
    mod agentic_edges;
    mod agentic_reference;
    mod agentic_turns;
    pub(crate) mod agentic_window;
    mod chunk_timing;
    mod e2e;
    mod event_order;
    mod fault_matrix;
    mod live_view;
    mod null_endpoint;
    mod profiling;
    mod request_params;
    mod run_control;
    mod submission;
    mod sweep;
    mod sweep_goodput;
    mod timing;
    mod videogen;
    mod warmup;
}

/// What a run connects to: several endpoints, TLS, connections past one address, `probe`.
mod endpoints {
    mod connections;
    mod multi_endpoint;
    mod probe;
    mod tls;
}

/// One benchmark over several processes or hosts: shards, `merge`, Slurm and namespaces.
mod sharding {
    mod agentic;
    mod merge;
    mod scale_out;
    mod shards;
}

/// The commands over a finished run: `report`, `compare`, `plot`, `early-stopping`, schemas.
mod report {
    mod compare;
    mod early_stopping;
    mod json_schema;
    mod plot;
    mod report_rebuild;
}

/// Where prompts come from: dataset files, predefined datasets, tokenizers, chat templates.
mod datasets {
    mod chat_template;
    mod files;
    mod predefined;
    mod tokenizer_load;
    mod tokenizer_spill;
}

/// The code and its map stay in shape: function lengths, `unsafe`, import circles,
/// docs/ARCHITECTURE.md, and docs/OUTPUT.md against the keys a run writes.
mod tidy {
    mod architecture;
    mod circles;
    mod code;
    mod output_keys;
    mod source;
}
