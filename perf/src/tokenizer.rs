//! The project's own BPE tokenizer (`make-bpe-tokenizer`) and the per-call cost of the ways the
//! `tokenizers` crate can count tokens (`count-tokens`).
//!
//! `make-bpe-tokenizer` trains a byte-level BPE of about 2,000 tokens on the project's text
//! (the prompts and reference answers of tests/assets/datasets/dummy_1k.jsonl, and the
//! max-throughput stub's response events) and writes tests/assets/tokenizers/bpe2k/tokenizer.json: a
//! realistic tokenizer for tests and benchmarks, made without a download.
//!
//! `count-tokens` times `encode`, `encode_fast` and the split count that llm-loadgen uses
//! (plan/src/tokenizer.rs `count_tokens`: added tokens, normalizer, pre-tokenizer, then the
//! model on each piece, no `Encoding` built), on one thread, after checking that all three
//! give the same counts.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{
    AddedToken, Model, OffsetReferential, OffsetType, PreTokenizer, Tokenizer, TokenizerBuilder,
};

/// The project's dataset, relative to the workspace root.
const DATASET: &str = "tests/assets/datasets/dummy_1k.jsonl";

#[derive(clap::Args)]
pub struct MakeBpeArgs {
    /// Where to write the tokenizer.json.
    #[arg(long, default_value = "tests/assets/tokenizers/bpe2k/tokenizer.json")]
    pub out: PathBuf,
    /// Vocabulary size to train to (bytes, merges and the special token).
    #[arg(long, default_value_t = 2000)]
    pub vocab_size: usize,
}

#[derive(clap::Args)]
pub struct CountArgs {
    /// The tokenizer.json to time.
    #[arg(long, default_value = "tests/assets/tokenizers/bpe2k/tokenizer.json")]
    pub tokenizer: PathBuf,
    /// Calls per method and text; the best of `--rounds` rounds is reported.
    #[arg(long, default_value_t = 20_000)]
    pub calls: usize,
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
}

/// The training text: every prompt and reference answer of the dataset, and the stub's
/// response as its stream delivers it (events of `stream_interval` characters), so its
/// 160-character answer counts as 16 tokens rather than one.
fn training_text() -> Result<Vec<String>> {
    let data = std::fs::read_to_string(DATASET)
        .with_context(|| format!("cannot read {DATASET}; run from the workspace root"))?;
    let mut out = Vec::new();
    for (i, line) in data.lines().enumerate() {
        let row: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("{DATASET} line {}", i + 1))?;
        for key in ["text_input", "ref_output"] {
            if let Some(text) = row.get(key).and_then(|v| v.as_str()) {
                out.push(text.to_string());
            }
        }
    }
    let stub = loadgen_stubs::StubConfig::new(loadgen_stubs::StubKind::MaxThroughput);
    let events = stub.output_length / stub.stream_interval.max(1);
    out.extend((0..events).map(|_| "x".repeat(stub.stream_interval)));
    Ok(out)
}

/// Trains the tokenizer and writes it.
pub fn make_bpe(args: &MakeBpeArgs) -> Result<()> {
    let text = training_text()?;
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(args.vocab_size)
        .min_frequency(0)
        .show_progress(false)
        .special_tokens(vec![AddedToken::from("<|endoftext|>", true)])
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut tok = TokenizerBuilder::<
        BPE,
        tokenizers::NormalizerWrapper,
        ByteLevel,
        ByteLevel,
        ByteLevel,
    >::new()
    .with_model(BPE::default())
    .with_normalizer(None)
    .with_pre_tokenizer(Some(ByteLevel::default()))
    .with_post_processor(Some(ByteLevel::default()))
    .with_decoder(Some(ByteLevel::default()))
    .build()
    .map_err(|e| anyhow::anyhow!("cannot build the tokenizer: {e}"))?;
    tok.train(&mut trainer, text.iter()).map_err(|e| anyhow::anyhow!("training failed: {e}"))?;
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    tok.save(&args.out, true)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.out.display()))?;
    println!(
        "wrote {} ({} tokens, trained on {} texts)",
        args.out.display(),
        tok.get_vocab_size(true),
        text.len()
    );
    Ok(())
}

/// The split count (the same sequence as plan/src/tokenizer.rs `count_tokens`).
fn split_count(tok: &Tokenizer, text: &str) -> tokenizers::Result<usize> {
    let mut pieces = tok.get_added_vocabulary().extract_and_normalize(tok.get_normalizer(), text);
    if let Some(pre) = tok.get_pre_tokenizer() {
        pre.pre_tokenize(&mut pieces)?;
    }
    let mut n = 0;
    for (piece, _, added) in pieces.get_splits(OffsetReferential::Normalized, OffsetType::None) {
        n += match added {
            Some(added) => added.len(),
            None => tok.get_model().tokenize(piece)?.len(),
        };
    }
    Ok(n)
}

type Method = fn(&Tokenizer, &str) -> tokenizers::Result<usize>;

const METHODS: [(&str, Method); 3] = [
    ("encode", |t, s| Ok(t.encode(s, false)?.len())),
    ("encode_fast", |t, s| Ok(t.encode_fast(s, false)?.len())),
    ("split_count", split_count),
];

/// The texts timed: the stub's response, a dataset prompt, and a long mixed text.
fn bench_texts() -> Result<Vec<(&'static str, String)>> {
    let text = training_text()?;
    let prompt = text.first().cloned().unwrap_or_default();
    let mixed: String = text.iter().take(40).map(String::as_str).collect::<Vec<_>>().join(" ");
    Ok(vec![("stub_160x", "x".repeat(160)), ("prompt", prompt), ("mixed_40_rows", mixed)])
}

/// Times every method on every text; fails when their counts differ.
pub fn count_tokens(args: &CountArgs) -> Result<()> {
    let tok = Tokenizer::from_file(&args.tokenizer)
        .map_err(|e| anyhow::anyhow!("cannot load {}: {e}", args.tokenizer.display()))?;
    println!(
        "tokenizer {}, best of {} rounds of {} calls",
        args.tokenizer.display(),
        args.rounds,
        args.calls
    );
    println!(
        "{:<14} {:>6} {:>7} {:>12} {:>12} {:>12}",
        "text", "bytes", "tokens", "encode", "encode_fast", "split_count"
    );
    for (name, text) in bench_texts()? {
        let counts: Vec<usize> = METHODS
            .iter()
            .map(|(_, m)| m(&tok, &text))
            .collect::<tokenizers::Result<_>>()
            .map_err(|e| anyhow::anyhow!("counting failed: {e}"))?;
        if counts.iter().any(|&c| c != counts[0]) {
            bail!("the methods disagree on {name}: {counts:?}");
        }
        let mut best_ns = [f64::MAX; 3];
        // Rounds interleave the methods, so a noisy moment hits all of them.
        for _ in 0..args.rounds {
            for (i, (_, method)) in METHODS.iter().enumerate() {
                let start = Instant::now();
                for _ in 0..args.calls {
                    std::hint::black_box(method(&tok, std::hint::black_box(&text)).ok());
                }
                let ns = start.elapsed().as_nanos() as f64 / args.calls as f64;
                best_ns[i] = best_ns[i].min(ns);
            }
        }
        println!(
            "{name:<14} {:>6} {:>7} {:>9.0} ns {:>9.0} ns {:>9.0} ns",
            text.len(),
            counts[0],
            best_ns[0],
            best_ns[1],
            best_ns[2]
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_methods_count_alike_on_the_committed_tokenizer() {
        let path =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/assets/tokenizers/bpe2k/tokenizer.json");
        let tok = Tokenizer::from_file(path).unwrap();
        assert!(tok.get_vocab_size(true) > 1000, "{}", tok.get_vocab_size(true));
        for text in ["", "x", "hello <|endoftext|> world", "Write a short story (case 7)"] {
            let counts: Vec<usize> = METHODS.iter().map(|(_, m)| m(&tok, text).unwrap()).collect();
            assert!(counts.iter().all(|&c| c == counts[0]), "{text:?}: {counts:?}");
        }
    }
}
