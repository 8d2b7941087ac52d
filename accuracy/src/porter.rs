//! The Porter stemmer as NLTK's `PorterStemmer()` runs it (mode NLTK_EXTENSIONS), which
//! `rouge_score` applies with `use_stemmer=True`.
//!
//! It works on the ASCII `[a-z0-9]` tokens the ROUGE tokenizer produces, so bytes are letters.

/// Irregular forms NLTK maps before any rule runs.
const POOL: &[(&str, &str)] = &[
    ("sky", "sky"),
    ("skies", "sky"),
    ("dying", "die"),
    ("lying", "lie"),
    ("tying", "tie"),
    ("news", "news"),
    ("innings", "inning"),
    ("inning", "inning"),
    ("outings", "outing"),
    ("outing", "outing"),
    ("cannings", "canning"),
    ("canning", "canning"),
    ("howe", "howe"),
    ("proceed", "proceed"),
    ("exceed", "exceed"),
    ("succeed", "succeed"),
];

/// A rule's condition on the stem left once its suffix is removed.
#[derive(Clone, Copy)]
enum Cond {
    Always,
    MeasurePositive,
    MeasureAbove1,
    /// Step 4's `ion`: measure above 1 and the stem ends in `s` or `t`.
    IonStem,
    /// Step 2's NLTK `logi`: the word less its last three letters has a positive measure.
    LogiWord,
}

/// Stems one lowercase ASCII token as `nltk.stem.porter.PorterStemmer().stem` does.
pub fn stem(word: &str) -> String {
    if let Some((_, to)) = POOL.iter().find(|(from, _)| *from == word) {
        return (*to).to_string();
    }
    if word.len() <= 2 {
        return word.to_string();
    }
    let mut w = step1a(word.as_bytes().to_vec());
    w = step1b(w);
    w = step1c(w);
    w = step2(w);
    w = step3(w);
    w = step4(w);
    w = step5a(w);
    w = step5b(w);
    String::from_utf8(w).unwrap_or_default()
}

fn is_vowel(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u')
}

/// Consonant flags left to right: a `y` is a consonant when it starts the word or follows a vowel.
fn consonant_flags(w: &[u8]) -> Vec<bool> {
    let mut flags: Vec<bool> = Vec::with_capacity(w.len());
    for (i, &b) in w.iter().enumerate() {
        let flag = if is_vowel(b) {
            false
        } else if b == b'y' {
            i == 0 || !flags[i - 1]
        } else {
            true
        };
        flags.push(flag);
    }
    flags
}

fn is_consonant(w: &[u8], i: usize) -> bool {
    consonant_flags(&w[..=i])[i]
}

/// The number of vowel-then-consonant transitions ("vc" pairs) in the stem.
fn measure(w: &[u8]) -> usize {
    let flags = consonant_flags(w);
    flags.windows(2).filter(|p| !p[0] && p[1]).count()
}

fn contains_vowel(w: &[u8]) -> bool {
    consonant_flags(w).iter().any(|c| !c)
}

fn ends_double_consonant(w: &[u8]) -> bool {
    let n = w.len();
    n >= 2 && w[n - 1] == w[n - 2] && is_consonant(w, n - 1)
}

fn ends_cvc(w: &[u8]) -> bool {
    let n = w.len();
    let classic = n >= 3
        && is_consonant(w, n - 3)
        && !is_consonant(w, n - 2)
        && is_consonant(w, n - 1)
        && !matches!(w[n - 1], b'w' | b'x' | b'y');
    classic || (n == 2 && !is_consonant(w, 0) && is_consonant(w, 1))
}

fn holds(cond: Cond, stem: &[u8], word: &[u8]) -> bool {
    match cond {
        Cond::Always => true,
        Cond::MeasurePositive => measure(stem) > 0,
        Cond::MeasureAbove1 => measure(stem) > 1,
        Cond::IonStem => measure(stem) > 1 && matches!(stem.last(), Some(b's' | b't')),
        Cond::LogiWord => measure(&word[..word.len().saturating_sub(3)]) > 0,
    }
}

/// The first rule whose suffix the word ends with decides: applied when its condition holds,
/// otherwise the word is returned unchanged (NLTK's `_apply_rule_list`).
fn apply_rules(word: Vec<u8>, rules: &[(&str, &str, Cond)]) -> Vec<u8> {
    for &(suffix, replacement, cond) in rules {
        if word.ends_with(suffix.as_bytes()) {
            let stem = &word[..word.len() - suffix.len()];
            if holds(cond, stem, &word) {
                let mut out = stem.to_vec();
                out.extend_from_slice(replacement.as_bytes());
                return out;
            }
            return word;
        }
    }
    word
}

fn replace_suffix(word: &[u8], suffix_len: usize, replacement: &str) -> Vec<u8> {
    let mut out = word[..word.len() - suffix_len].to_vec();
    out.extend_from_slice(replacement.as_bytes());
    out
}

fn step1a(word: Vec<u8>) -> Vec<u8> {
    if word.ends_with(b"ies") && word.len() == 4 {
        return replace_suffix(&word, 3, "ie");
    }
    use Cond::Always;
    apply_rules(
        word,
        &[("sses", "ss", Always), ("ies", "i", Always), ("ss", "ss", Always), ("s", "", Always)],
    )
}

fn step1b(word: Vec<u8>) -> Vec<u8> {
    if word.ends_with(b"ied") {
        return replace_suffix(&word, 3, if word.len() == 4 { "ie" } else { "i" });
    }
    if word.ends_with(b"eed") {
        let stem = &word[..word.len() - 3];
        return if measure(stem) > 0 { replace_suffix(&word, 1, "") } else { word };
    }
    let Some(stem) = [&b"ed"[..], &b"ing"[..]].iter().find_map(|suffix| {
        let stem = word.strip_suffix(*suffix)?;
        contains_vowel(stem).then(|| stem.to_vec())
    }) else {
        return word;
    };
    for (suffix, replacement) in [("at", "ate"), ("bl", "ble"), ("iz", "ize")] {
        if stem.ends_with(suffix.as_bytes()) {
            return replace_suffix(&stem, suffix.len(), replacement);
        }
    }
    if ends_double_consonant(&stem) {
        let last = stem[stem.len() - 1];
        if matches!(last, b'l' | b's' | b'z') {
            return stem;
        }
        return stem[..stem.len() - 1].to_vec();
    }
    if measure(&stem) == 1 && ends_cvc(&stem) {
        return replace_suffix(&stem, 0, "e");
    }
    stem
}

fn step1c(word: Vec<u8>) -> Vec<u8> {
    // NLTK's rule: y -> i only after a consonant, and not when that consonant is the whole stem.
    if let Some(stem) = word.strip_suffix(b"y") {
        if stem.len() > 1 && is_consonant(stem, stem.len() - 1) {
            return replace_suffix(&word, 1, "i");
        }
    }
    word
}

fn step2(word: Vec<u8>) -> Vec<u8> {
    if let Some(stem) = word.strip_suffix(b"alli") {
        if measure(stem) > 0 {
            return step2(replace_suffix(&word, 4, "al"));
        }
    }
    use Cond::{LogiWord, MeasurePositive as M};
    apply_rules(
        word,
        &[
            ("ational", "ate", M),
            ("tional", "tion", M),
            ("enci", "ence", M),
            ("anci", "ance", M),
            ("izer", "ize", M),
            ("bli", "ble", M),
            ("alli", "al", M),
            ("entli", "ent", M),
            ("eli", "e", M),
            ("ousli", "ous", M),
            ("ization", "ize", M),
            ("ation", "ate", M),
            ("ator", "ate", M),
            ("alism", "al", M),
            ("iveness", "ive", M),
            ("fulness", "ful", M),
            ("ousness", "ous", M),
            ("aliti", "al", M),
            ("iviti", "ive", M),
            ("biliti", "ble", M),
            ("fulli", "ful", M),
            ("logi", "log", LogiWord),
        ],
    )
}

fn step3(word: Vec<u8>) -> Vec<u8> {
    use Cond::MeasurePositive as M;
    apply_rules(
        word,
        &[
            ("icate", "ic", M),
            ("ative", "", M),
            ("alize", "al", M),
            ("iciti", "ic", M),
            ("ical", "ic", M),
            ("ful", "", M),
            ("ness", "", M),
        ],
    )
}

fn step4(word: Vec<u8>) -> Vec<u8> {
    use Cond::{IonStem, MeasureAbove1 as M};
    apply_rules(
        word,
        &[
            ("al", "", M),
            ("ance", "", M),
            ("ence", "", M),
            ("er", "", M),
            ("ic", "", M),
            ("able", "", M),
            ("ible", "", M),
            ("ant", "", M),
            ("ement", "", M),
            ("ment", "", M),
            ("ent", "", M),
            ("ion", "", IonStem),
            ("ou", "", M),
            ("ism", "", M),
            ("ate", "", M),
            ("iti", "", M),
            ("ous", "", M),
            ("ive", "", M),
            ("ize", "", M),
        ],
    )
}

fn step5a(word: Vec<u8>) -> Vec<u8> {
    if let Some(stem) = word.strip_suffix(b"e") {
        let m = measure(stem);
        if m > 1 || (m == 1 && !ends_cvc(stem)) {
            return stem.to_vec();
        }
    }
    word
}

fn step5b(word: Vec<u8>) -> Vec<u8> {
    // `ll` -> `l` when the word less its last letter has a measure above 1.
    if word.ends_with(b"ll") && measure(&word[..word.len() - 1]) > 1 {
        return word[..word.len() - 1].to_vec();
    }
    word
}

#[cfg(test)]
mod tests {
    use super::stem;

    /// Expected stems from `nltk.stem.porter.PorterStemmer().stem(w)` (nltk 3.10.4), run once.
    #[test]
    fn porter_stems_match_nltk() {
        for (word, want) in super::super::rouge_fixture::PORTER_CASES {
            assert_eq!(stem(word), *want, "stem of {word:?}");
        }
    }
}
