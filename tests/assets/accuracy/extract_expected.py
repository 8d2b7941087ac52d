"""Computes the expected extractor outputs in coordinator/src/accuracy/tests.rs, once.

Imports the reference's own evaluation/extractor.py (it needs only the standard library) from
a checkout of the reference tool: `REFSRC=/tmp/refsrc python3 tests/assets/accuracy/extract_expected.py`.
Prints Rust `(input, expected)` rows; None prints as `None`. No test runs this script.
"""

import importlib.util
import os

spec = importlib.util.spec_from_file_location(
    "extractor", os.path.join(os.environ["REFSRC"], "src/inference_endpoint/evaluation/extractor.py")
)
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)

CASES = {
    "abcd_extractor": [
        "", "The answer is B", "**Answer:** C", "\\boxed{D}", "*Answers* – B", "Answer: (C)",
        "answer: d", "Option B is best", "Choice: c", "\\boxed{\\text{A } 2.08}", "\\boxed{\\textbf{C}}",
        "I pick (A) here", "x(A)", "It is **B** for sure", "\\textbf{The D option}",
        "**D) the fourth**", "B.", "  C) because", "**a", "dunno", "zzz", "Answer: E",
        "Answers: (b)", "line one\nAnswer: A\nAnswer: B", "answer\u2003:\u2003B",
        "The answer is C but Option A", "[D]", "\u001cAnswer: A", "a", "\n\nD",
        "**Answer** B", "_Answer_ A", "ANSWERS - D", "The choice C.",
    ],
    "boxed_math_extractor": [
        "", "no digits", "The answer is \\boxed{42}.", "\\boxed{1, 2, 3}", "\\boxed{}\\boxed{7}",
        "\\boxed{7}\\boxed{}", "\\framebox{ 9 }", "boxed{a\nb}", "1 then 22 then 333", "x = 12, y = 5",
        "\\boxed{\\frac{1}{2}}", "\\boxed{}", "٣ arabic digit", "\\boxed{ , }", "\\boxed{x,\u001c5\u001c}",
    ],
    "identity_extractor": ["", "  keep  spaces \n", "text"],
    "python_code_extractor": [
        "", "   \n ", "no code here", "```python\ndef foo():\n    pass\n```",
        "```\nprint('hello')\n```", "```python\na=1\n```\n```python\nb=2\n```", "```py\nx=1\n```",
        "```Python \n\n y=2\n```", "```\nfirst\n```\n```\nsecond\n```", "```python```", "```unterminated",
        "```python\nA\n``` and ```\nB\n```", "```PY\t\nz=3```",
    ],
}


def rs(s):
    if s is None:
        return "None"
    body = "".join(
        "\\" + c if c in '"\\' else (c if 0x20 <= ord(c) < 0x7F else "\\u{%x}" % ord(c)) for c in s
    )
    return 'Some("' + body + '")'


for name, inputs in CASES.items():
    print(f"// {name}")
    cls = ext.Extractor.get(name)
    for text in inputs:
        print(f"    ({rs(text)[5:-1]}, {rs(cls.extract(text))}),")
