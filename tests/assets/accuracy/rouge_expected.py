"""Computes the expected values in accuracy/src/rouge_fixture.rs, once.

Needs python3 with `rouge_score==0.1.2`, `nltk`, `numpy`, `absl-py`, `six` (a scratch venv:
`python3 -m venv /tmp/rvenv && /tmp/rvenv/bin/pip install rouge_score==0.1.2 nltk numpy absl-py six`).
Run: `/tmp/rvenv/bin/python tests/assets/accuracy/rouge_expected.py > accuracy/src/rouge_fixture.rs`
No test runs this script; the tests read the values it wrote.
"""

import random

import numpy as np
from nltk.stem import porter
from rouge_score import rouge_scorer

FIXED = [
    ("The cat sat on the mat.", "The cat sat on the mat."),
    ("the cat sat on the mat", "THE CAT SAT ON THE MAT!!!"),
    ("", "A reference with words."),
    ("A prediction with words.", ""),
    ("", ""),
    ("...!!!???", "!!!"),
    ("Running runs runner ran.", "He runs; she is running."),
    ("The runners were running happily", "A runner runs happily"),
    ("The quick brown fox jumps over the lazy dog", "The quick brown dog jumps on the log."),
    ("1 2 3 4 5", "5 4 3 2 1"),
    ("In 2024, revenue grew 12.5% to $3.2bn.", "Revenue grew 12.5 percent in 2024 to 3.2 billion dollars."),
    ("the the the the", "the"),
    ("the", "the the the the"),
    ("a a b b a a", "a b a b a b"),
    ("First sentence here.\nSecond sentence there.", "Second sentence there.\nFirst sentence here."),
    ("One.\nTwo.\nThree.", "One two three."),
    ("One two three.", "One.\nTwo.\nThree."),
    ("\n\nblank lines\n\n\naround\n", "blank lines around"),
    ("caresses ponies ties caress cats", "caress poni ti caress cat"),
    ("feed agreed plastered bled motoring sing", "fed agree plaster bleed motor sang"),
    ("conflated troubled sized hopping tanned falling hissing fizzed failing filing",
     "conflate trouble size hop tan fall hiss fizz fail file"),
    ("happy sky relational conditional rational valenci hesitanci digitizer",
     "happi sky relate condition rational valence hesitance digitize"),
    ("conformabli radicalli differentli vileli analogousli vietnamization predication operator",
     "conformable radical different vile analogous vietnamize predicate operate"),
    ("feudalism decisiveness hopefulness callousness formaliti sensitiviti sensibiliti",
     "feudal decisive hopeful callous formal sensitive sensible"),
    ("triplicate formative formalize electriciti electrical hopeful goodness",
     "triplic form formal electric electric hope good"),
    ("revival allowance inference airliner gyroscopic adjustable defensible irritant",
     "reviv allow infer airlin gyroscop adjust defens irrit"),
    ("replacement adjustment dependent adoption homologou communism activate angulariti",
     "replac adjust depend adopt homolog commun activ angular"),
    ("homologous effective bowdlerize probate rate cease controll roll",
     "homolog effect bowdler probat rate ceas control roll"),
    ("dying lying tying news innings outings cannings howe proceed exceed succeed skies",
     "die lie tie news inning outing canning howe proceeding exceeding succeeding sky"),
    ("generously generalization generate generic", "general generation generator genesis"),
    ("Café naïve résumé façade", "cafe naive resume facade"),
    ("日本語のテキスト", "日本語のテキスト"),
    ("émigré über straße", "emigre uber strasse"),
    ("KELVIN \u212a sign", "kelvin k sign"),
    ("tab\tseparated\twords", "tab separated words"),
    ("hyphen-ated well-known state-of-the-art", "hyphen ated well known state of the art"),
    ("don't can't won't it's", "do not cannot will not it is"),
    ("e-mail e.g. i.e. U.S.A.", "email eg ie usa"),
    ("x" * 3 + " " + "y" * 4 + " " + "yyyy", "xxx yyyy"),
    ("syzygy toy boy yearly", "syzygi toi boi yearli"),
    ("agreement agreements agreed agreeing", "agree agree agree agree"),
    ("abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),
    ("123abc 456def", "123abc 456 def"),
    ("Model answer: 42.", "42"),
    ("The answer is B.", "B"),
    ("The patient presented with acute myocardial infarction and was treated.",
     "Patient was treated for an acute myocardial infarction."),
    ("Sentence one. Sentence two.\nSentence three.", "Sentence one.\nSentence two. Sentence three."),
    ("a b c d e f g", "g f e d c b a"),
    ("a b a b a b a b", "b a b a b a b a"),
    ("repeat repeat repeat once", "once repeat"),
]

WORDS = (
    "the a of and to in is was for on with as by at from that this it be are were "
    "running runs ran runner quickly quick happiness happy happily connection connected "
    "connecting connects generalization general generous agree agreed agreement "
    "cat cats dog dogs mouse mice city cities study studies studying studied "
    "report reported reporting reports 2024 3 17 99 100 model models modeling"
).split()
PUNCT = [".", ",", "!", "?", ";", ":", " -", "'s", ""]


def random_text(rng):
    sents = []
    for _ in range(rng.randint(1, 3)):
        n = rng.randint(0, 12)
        words = [rng.choice(WORDS) for _ in range(n)]
        words = [w.capitalize() if rng.random() < 0.2 else w for w in words]
        words = [w + rng.choice(PUNCT) for w in words]
        sents.append(" ".join(words))
    return rng.choice(["\n", " ", "\n\n"]).join(sents)


def pairs():
    rng = random.Random(15)
    out = list(FIXED)
    while len(out) < 100:
        out.append((random_text(rng), random_text(rng)))
    return out


PORTER_WORDS = (
    "caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated "
    "troubled sized hopping tanned falling hissing fizzed failing filing happy sky relational "
    "conditional rational valenci hesitanci digitizer conformabli radicalli differentli vileli "
    "analogousli vietnamization predication operator feudalism decisiveness hopefulness "
    "callousness formaliti sensitiviti sensibiliti triplicate formative formalize electriciti "
    "electrical hopeful goodness revival allowance inference airliner gyroscopic adjustable "
    "defensible irritant replacement adjustment dependent adoption homologou communism activate "
    "angulariti homologous effective bowdlerize probate rate cease controll roll dying lying "
    "tying news innings outings cannings howe proceed exceed succeed skies generously "
    "generalization archaeology analogies yyyy syzygy yearly enjoy spied tied dies died "
    "fullness hopefulli oed ied ies abed bed eed need aaaa 2024 a1b2c3 analogy catalogi"
).split()


def rs(s):
    return '"' + "".join(c if c not in '"\\' else "\\" + c for c in s).replace("\n", "\\n").replace("\t", "\\t") + '"'


def main():
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=True)
    stemmer = porter.PorterStemmer()
    print("//! Expected values for the ROUGE and Porter tests, written by")
    print("//! tests/assets/accuracy/rouge_expected.py (rouge_score 0.1.2, nltk 3.10.4) once.")
    print()
    print("/// (prediction, reference, [rouge1, rouge2, rougeL, rougeLsum] F-measures).")
    print("pub const ROUGE_PAIRS: &[(&str, &str, [f64; 4])] = &[")
    all_scores = []
    for pred, ref in pairs():
        s = scorer.score(ref, pred)
        vals = [s[k].fmeasure for k in ("rouge1", "rouge2", "rougeL", "rougeLsum")]
        all_scores.append(vals)
        print(f"    ({rs(pred)}, {rs(ref)}, [{', '.join(repr(float(v)) for v in vals)}]),")
    print("];")
    print()
    print("/// (word, nltk PorterStemmer().stem(word)).")
    print("pub const PORTER_CASES: &[(&str, &str)] = &[")
    for w in PORTER_WORDS:
        print(f"    ({rs(w)}, {rs(stemmer.stem(w))}),")
    print("];")
    print()
    # The reference's aggregate: f"{round(np.mean(v) * 100, 4)}" over every pair, per type.
    agg = [f"{round(np.mean([v[k] for v in all_scores]) * 100, 4)}" for k in range(4)]
    print("/// The reference's aggregate over all 100 pairs: f\"{round(np.mean(v) * 100, 4)}\".")
    print(f"pub const ROUGE_AGGREGATE: [&str; 4] = [{', '.join(rs(a) for a in agg)}];")
    # numpy's sum against a plain left-to-right sum, for the pairwise-summation check.
    vals = [v[0] for v in all_scores]
    print(f"/// np.sum of the 100 rouge1 values (pairwise summation): {float(np.sum(vals))!r}; naive: {sum(vals)!r}.")
    print(f"pub const ROUGE1_NP_SUM: f64 = {float(np.sum(vals))!r};")


if __name__ == "__main__":
    main()
