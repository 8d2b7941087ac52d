//! The `random` predefined dataset: prompts made of runs of consecutive token ids, drawn as
//! the reference draws them (numpy `default_rng(random_seed)`: lengths in
//! [input_seq_length × range_ratio, input_seq_length], starts in [0, vocab size)) and decoded
//! by the client tokenizer.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::AppError;
use crate::row::Row;
use loadgen_py::numpy::NumpyRng;

/// `generate_params` of `random`, with the reference's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomParams {
    pub num_sequences: usize,
    pub input_seq_length: i64,
    pub range_ratio: f64,
    pub random_seed: u64,
    pub save_tokenized_data: bool,
    /// The tokenizer to decode with (a path or a Hugging Face id); `None`: the run's.
    pub tokenizer: Option<String>,
}

impl Default for RandomParams {
    fn default() -> Self {
        RandomParams {
            num_sequences: 1024,
            input_seq_length: 1024,
            range_ratio: 1.0,
            random_seed: 42,
            save_tokenized_data: false,
            tokenizer: None,
        }
    }
}

/// The longest prompt drawn, in tokens: about what a row's text bound
/// (`PROMPT_BYTES_MAX`, 4 MiB) holds.
pub const MAX_SEQ_LENGTH: i64 = 1 << 20;

/// The most rows generated (their ids and texts are all held before the run).
pub const MAX_SEQUENCES: usize = 10_000_000;

/// The keys the reference's `RandomDataset.generate` takes (`force_regenerate` is taken by
/// its loader; `random` caches nothing, so it changes nothing).
pub const RANDOM_KEYS: [&str; 7] = [
    "num_sequences",
    "input_seq_length",
    "range_ratio",
    "random_seed",
    "save_tokenized_data",
    "tokenizer",
    "force_regenerate",
];

impl RandomParams {
    /// Reads `generate_params`, refusing unknown keys and bad values by name (`at` is the
    /// dataset in messages, e.g. `dataset random`).
    pub fn parse(at: &str, params: Option<&BTreeMap<String, Value>>) -> Result<Self, AppError> {
        let mut out = RandomParams::default();
        for (key, value) in params.into_iter().flatten() {
            let bad = |what: &str| {
                AppError::Input(format!(
                    "{at}: generate_params.{key} = {value} is not {what}; fix the value"
                ))
            };
            let whole = || value.as_i64().ok_or_else(|| bad("a whole number"));
            match key.as_str() {
                "num_sequences" => {
                    out.num_sequences = whole()?
                        .try_into()
                        .ok()
                        .filter(|&n: &usize| n >= 1)
                        .ok_or_else(|| bad("a whole number of 1 or more"))?
                }
                "input_seq_length" => {
                    out.input_seq_length =
                        Some(whole()?).filter(|&n| n >= 1).ok_or_else(|| bad("1 or more"))?
                }
                "range_ratio" => out.range_ratio = value.as_f64().ok_or_else(|| bad("a number"))?,
                "random_seed" => {
                    out.random_seed = value.as_u64().ok_or_else(|| bad("a whole number >= 0"))?
                }
                "save_tokenized_data" => {
                    out.save_tokenized_data = value.as_bool().ok_or_else(|| bad("true or false"))?
                }
                "tokenizer" => {
                    out.tokenizer =
                        Some(value.as_str().ok_or_else(|| bad("a tokenizer path or id"))?.into())
                }
                "force_regenerate" => {
                    value.as_bool().ok_or_else(|| bad("true or false"))?;
                }
                _ => {
                    return Err(AppError::Input(format!(
                        "{at}: generate_params.{key} is not a parameter of the random dataset \
                         (known: {}); leave it out",
                        RANDOM_KEYS.join(", ")
                    )))
                }
            }
        }
        out.check_range(at)?;
        Ok(out)
    }

    /// The shortest length drawn: `int(input_seq_length * range_ratio)`, as Python truncates.
    pub fn min_length(&self) -> i64 {
        (self.input_seq_length as f64 * self.range_ratio) as i64
    }

    fn check_range(&self, at: &str) -> Result<(), AppError> {
        if self.input_seq_length > MAX_SEQ_LENGTH || self.num_sequences > MAX_SEQUENCES {
            return Err(AppError::Input(format!(
                "{at}: generate_params.input_seq_length {} or num_sequences {} is over this \
                 tool's bound ({MAX_SEQ_LENGTH} tokens a row, {MAX_SEQUENCES} rows); lower it",
                self.input_seq_length, self.num_sequences
            )));
        }
        let low = self.min_length();
        if !(0.0..).contains(&self.range_ratio) || low > self.input_seq_length {
            return Err(AppError::Input(format!(
                "{at}: generate_params.range_ratio = {} gives a shortest prompt of {low} tokens, \
                 outside 0..={} (input_seq_length); give a range_ratio between 0 and 1",
                self.range_ratio, self.input_seq_length
            )));
        }
        Ok(())
    }
}

/// The tokenizer the rows are decoded with: the `tokenizers` model and whether transformers'
/// `decode` would clean up tokenization spaces (`tokenizer_config.json`, default off).
pub struct Decoder {
    inner: tokenizers::Tokenizer,
    clean_up_spaces: bool,
}

impl Decoder {
    /// Loads the `tokenizer.json` at `file` and the `tokenizer_config.json` beside it.
    pub fn load(file: &Path) -> Result<Decoder, AppError> {
        let inner = tokenizers::Tokenizer::from_file(file).map_err(|e| {
            AppError::Setup(format!("cannot load tokenizer {}: {e}", file.display()))
        })?;
        let config = file.parent().map(|d| d.join("tokenizer_config.json"));
        let clean_up_spaces = config
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|v| v.get("clean_up_tokenization_spaces")?.as_bool())
            .unwrap_or(false);
        Ok(Decoder { inner, clean_up_spaces })
    }

    /// transformers' `vocab_size`: the model's vocabulary without added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(false)
    }

    /// transformers' `decode(ids)`: special tokens kept, spaces cleaned up when configured.
    fn decode(&self, ids: &[u32]) -> Result<String, AppError> {
        let text = self
            .inner
            .decode(ids, false)
            .map_err(|e| AppError::Setup(format!("the tokenizer cannot decode: {e}")))?;
        Ok(if self.clean_up_spaces { clean_up_tokenization(&text) } else { text })
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>, AppError> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| AppError::Setup(format!("the tokenizer cannot encode: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }
}

/// transformers' `clean_up_tokenization`: spaces before punctuation and contractions dropped.
fn clean_up_tokenization(text: &str) -> String {
    const PAIRS: [(&str, &str); 10] = [
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ];
    PAIRS.iter().fold(text.to_string(), |s, (from, to)| s.replace(from, to))
}

/// The lengths and start ids of every row, in the reference's draw order (all lengths,
/// then all starts, from one generator).
pub fn draw_lengths_and_starts(params: &RandomParams, vocab_size: usize) -> Vec<(usize, usize)> {
    let mut rng = NumpyRng::new(params.random_seed);
    let n = params.num_sequences;
    let lengths = rng.integers(params.min_length(), params.input_seq_length + 1, n);
    let starts = rng.integers(0, vocab_size as i64, n);
    // Both ranges were checked non-empty (check_range; the vocabulary is not empty).
    let (lengths, starts) = (lengths.unwrap_or_default(), starts.unwrap_or_default());
    lengths.into_iter().zip(starts).map(|(len, start)| (len as usize, start as usize)).collect()
}

/// The token ids of one row: `(start + j) % vocab_size` for j below `length`.
pub fn row_token_ids(start: usize, length: usize, vocab_size: usize) -> Vec<u32> {
    (0..length).map(|j| ((start + j) % vocab_size) as u32).collect()
}

/// Generates the rows: each prompt decoded from its ids, with the re-encoded ids as
/// `input_tokens` when `save_tokenized_data` is set (as the reference stores them).
pub fn random_rows(params: &RandomParams, decoder: &Decoder) -> Result<Vec<Row>, AppError> {
    let vocab_size = decoder.vocab_size();
    if vocab_size == 0 {
        return Err(AppError::Setup("the random dataset's tokenizer has no vocabulary".into()));
    }
    draw_lengths_and_starts(params, vocab_size)
        .into_iter()
        .map(|(length, start)| {
            let prompt = decoder.decode(&row_token_ids(start, length, vocab_size))?;
            if prompt.len() > super::spec::PROMPT_BYTES_MAX {
                return Err(AppError::Input(format!(
                    "dataset random: a prompt of {length} tokens decodes to {} bytes, over the \
                     {} byte limit per row; lower generate_params.input_seq_length",
                    prompt.len(),
                    super::spec::PROMPT_BYTES_MAX
                )));
            }
            let token_ids =
                if params.save_tokenized_data { Some(decoder.encode(&prompt)?) } else { None };
            Ok(Row { prompt: Some(prompt), token_ids, ..Row::default() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bpe2k() -> Decoder {
        let file = format!(
            "{}/../tests/assets/tokenizers/bpe2k/tokenizer.json",
            env!("CARGO_MANIFEST_DIR")
        );
        Decoder::load(Path::new(&file)).unwrap()
    }

    fn params(n: usize, isl: i64, ratio: f64, seed: u64) -> RandomParams {
        RandomParams {
            num_sequences: n,
            input_seq_length: isl,
            range_ratio: ratio,
            random_seed: seed,
            ..RandomParams::default()
        }
    }

    #[test]
    fn lengths_stay_within_isl_times_ratio_and_isl() {
        let p = params(500, 100, 0.25, 7);
        let drawn = draw_lengths_and_starts(&p, 1507);
        assert_eq!(drawn.len(), 500);
        assert!(drawn.iter().all(|&(len, start)| (25..=100).contains(&len) && start < 1507));
        let lengths: std::collections::BTreeSet<usize> = drawn.iter().map(|d| d.0).collect();
        assert!(lengths.contains(&25) && lengths.contains(&100), "both ends are drawn");
        // A ratio of 1 gives every row the full length and draws no length at all.
        let full = draw_lengths_and_starts(&params(5, 64, 1.0, 42), 10);
        assert!(full.iter().all(|d| d.0 == 64));
        let starts: Vec<usize> = full.iter().map(|d| d.1).collect();
        assert_eq!(starts, [0, 7, 6, 4, 4], "starts are integers(0, 10) of a fresh rng(42)");
    }

    #[test]
    fn token_ids_wrap_at_the_vocabulary_size() {
        assert_eq!(row_token_ids(1505, 5, 1507), [1505, 1506, 0, 1, 2]);
        assert_eq!(row_token_ids(3, 0, 1507), Vec::<u32>::new());
    }

    #[test]
    fn same_seed_same_rows_other_seed_other_rows() {
        let dec = bpe2k();
        let a = random_rows(&params(8, 32, 0.5, 42), &dec).unwrap();
        let b = random_rows(&params(8, 32, 0.5, 42), &dec).unwrap();
        let c = random_rows(&params(8, 32, 0.5, 43), &dec).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|r| r.prompt.as_ref().is_some_and(|p| !p.is_empty())));
        assert!(a.iter().all(|r| r.token_ids.is_none()), "ids only with save_tokenized_data");
    }

    #[test]
    fn rows_are_the_decoded_runs_and_saved_ids_are_the_prompt_reencoded() {
        let dec = bpe2k();
        let mut p = params(4, 16, 0.5, 3);
        p.save_tokenized_data = true;
        let rows = random_rows(&p, &dec).unwrap();
        for (row, (len, start)) in rows.iter().zip(draw_lengths_and_starts(&p, dec.vocab_size())) {
            let ids = row_token_ids(start, len, dec.vocab_size());
            let text = dec.inner.decode(&ids, false).unwrap();
            assert_eq!(row.prompt.as_deref(), Some(text.as_str()));
            let reencoded = dec.inner.encode(text.as_str(), false).unwrap().get_ids().to_vec();
            assert_eq!(row.token_ids.as_ref(), Some(&reencoded));
        }
    }

    #[test]
    fn generate_params_are_read_with_the_reference_defaults_and_bad_ones_named() {
        assert_eq!(RandomParams::parse("dataset random", None).unwrap(), RandomParams::default());
        let map = |json: &str| -> BTreeMap<String, Value> { serde_json::from_str(json).unwrap() };
        let given = map(r#"{"num_sequences": 3, "input_seq_length": 9, "range_ratio": 0.5,
            "random_seed": 1, "save_tokenized_data": true, "tokenizer": "t", "force_regenerate": true}"#);
        let p = RandomParams::parse("dataset random", Some(&given)).unwrap();
        assert_eq!((p.num_sequences, p.input_seq_length, p.min_length()), (3, 9, 4));
        assert_eq!((p.random_seed, p.save_tokenized_data), (1, true));
        assert_eq!(p.tokenizer.as_deref(), Some("t"));
        for (json, needle) in [
            (r#"{"colour": 1}"#, "dataset random: generate_params.colour is not a parameter"),
            (r#"{"num_sequences": 0}"#, "generate_params.num_sequences = 0"),
            (r#"{"input_seq_length": "x"}"#, "generate_params.input_seq_length = \"x\""),
            (r#"{"range_ratio": 1.5}"#, "generate_params.range_ratio = 1.5"),
            (r#"{"range_ratio": -0.1}"#, "generate_params.range_ratio = -0.1"),
            (r#"{"random_seed": -1}"#, "generate_params.random_seed = -1"),
            (r#"{"input_seq_length": 2000000}"#, "input_seq_length 2000000 or num_sequences"),
        ] {
            let err = RandomParams::parse("dataset random", Some(&map(json))).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{json}");
            assert!(err.to_string().contains(needle), "{json}: {err}");
        }
    }

    #[test]
    fn clean_up_follows_transformers_and_the_tokenizer_config() {
        assert_eq!(clean_up_tokenization("a . b , c 's d n't"), "a. b, c's dn't");
        assert!(!bpe2k().clean_up_spaces, "off without tokenizer_config.json");
        let dir = std::env::temp_dir().join(format!("llm-loadgen-cleanup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = format!(
            "{}/../tests/assets/tokenizers/bpe2k/tokenizer.json",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::copy(src, dir.join("tokenizer.json")).unwrap();
        std::fs::write(
            dir.join("tokenizer_config.json"),
            r#"{"clean_up_tokenization_spaces": true}"#,
        )
        .unwrap();
        let dec = Decoder::load(&dir.join("tokenizer.json")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(dec.clean_up_spaces);
        let ids = dec.encode("hello , world").unwrap();
        assert_eq!(dec.decode(&ids).unwrap().trim_start(), "hello, world");
    }
}
