"""Computes the expected extractor outputs in accuracy/src/tests.rs, once.

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
    "function_call_extractor": [
        "", "  ", "no calls here", "get_weather(city='London')",
        '[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"London\\"}"}}]',
        '[{"type":"function","function":{"name":"f"}}]',
        '[{"function":{"name":"f","arguments":"not json"}}]',
        '[{"function":{"arguments":{"a":1}}}]',
        '[{"name":"lookup","arguments":{"q":"caf\u00e9","n":1.50,"big":12345678901234567890,"x":-0,"e":1e16,"s":1e-5}}]',
        '[{"name":"only"}]', '[]', '{"name":"f"}', '[1, 2]',
        "Call search(query=\"rust lang\", limit=10) then fetch(url='http://x', retries=-2)",
        "f(a=True, b=None, c=[1, (2, 3), {'k': 'v'}], d=1.5e3, e=0x1F, f='\\n\\t\\'q\\'')",
        "f(city)", "f(x: int, y: str)", "print(x=1) and len(y=2)", "outer(inner(a=1), b=2)",
        "f(x=1, x=2)", "f(x=1, 2)", "f(1, 2, key='v')", "f(*args, **kwargs)", "f(a=b.c.d)",
        "f(a='one' 'two')", "f(a={1: 'x', True: 'y'})", "f(a=-0.0, b=+3, c=.5, d=1_000)",
        "f(class=1)", "f(a='unterminated)", "f(a=1,)", "f()", "The f(a=1)", "x.get(k=1)",
        "g(a=1) g(b=2)", "f(a=\"\\u00e9\\x41\\101\")", "f(a=1e400)", "f(a=[])", "f(,)",
        "f(a=(1,))", "f(a=(1))", "f(a=())", "f(a='\\q')", "unbalanced(a=1",
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
