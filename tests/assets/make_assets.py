#!/usr/bin/env python3
"""Writes the project's test assets (run from the repository root):

- tests/assets/datasets/dummy_1k.jsonl: 1,000 prompts in a `text_input` column, the same
  prompts as the binary's built-in synthetic dataset (plan/src/dataset.rs keeps them in sync and
  a unit test checks it);
- tests/assets/tokenizers/char/: a WordLevel tokenizer with one token per character;
- tests/assets/tokenizers/char_chat/: the same plus a small chat template;
- tests/assets/tokenizers/char_jinja/: the same with its template in chat_template.jinja (as
  transformers 5 writes it) and a stale one in tokenizer_config.json, which transformers
  ignores when the file exists.
"""

import json
import os
import string

TEMPLATES = [
    "Write a short story about",
    "Explain the basics of",
    "Analyze the importance of",
    "Summarize recent progress in",
    "Describe a practical use of",
    "List three open problems in",
    "Compare two approaches to",
    "Give a beginner's guide to",
    "Discuss the main risks of",
    "Outline a lesson plan on",
]
TOPICS = [
    "machine learning",
    "renewable energy",
    "ocean currents",
    "quantum computing",
    "urban gardening",
    "ancient history",
    "space exploration",
    "public health",
    "data privacy",
    "music theory",
]

SPECIALS = ["<unk>", "<pad>", "<s>", "</s>"]

CHAT_TEMPLATE = (
    "{%- if tools %}<|tools|>{{ tools | tojson }}<|/tools|>\n{% endif %}"
    "{%- for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "{%- if message.reasoning_content %}\n<think>{{ message.reasoning_content }}</think>{% endif %}"
    "{%- if message.tool_calls %}\n<tool_call>{{ message.tool_calls | tojson }}{% endif %}"
    "<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# chat_template.jinja of char_jinja: special tokens (one token each with the char tokenizer)
# around each message, so a test can tell it from CHAT_TEMPLATE and from the stale one.
JINJA_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}{{ eos_token }}"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}\n"
)

# tokenizer_config.json's template in char_jinja: never used while chat_template.jinja exists.
STALE_TEMPLATE = "{% for message in messages %}STALE {{ message['content'] }}{% endfor %}"


def prompt(i):
    return f"{TEMPLATES[i % 10]} {TOPICS[(i // 10) % 10]} (case {i})"


def write_dataset(root):
    path = os.path.join(root, "datasets", "dummy_1k.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for i in range(1000):
            row = {"text_input": prompt(i), "ref_output": f"A reference answer for case {i}"}
            f.write(json.dumps(row) + "\n")


def vocab():
    chars = (
        list(string.ascii_lowercase)
        + list(string.ascii_uppercase)
        + list(string.digits)
        + [" ", "\t", "\n", "\r"]
        + list(string.punctuation)
    )
    tokens = SPECIALS + chars
    assert len(tokens) == len(set(tokens)) == 102
    return {tok: i for i, tok in enumerate(tokens)}


def tokenizer_json():
    added = [
        {
            "id": i,
            "content": tok,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, tok in enumerate(SPECIALS)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Split",
            "pattern": {"String": ""},
            "behavior": "Isolated",
            "invert": False,
        },
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab(), "unk_token": "<unk>"},
    }


def tokenizer_config(chat_template):
    config = {
        "bos_token": "<s>",
        "eos_token": "</s>",
        "model_max_length": 1000000,
        "pad_token": "<pad>",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<unk>",
    }
    if chat_template:
        config["chat_template"] = chat_template
    return config


def write_tokenizer(root, name, chat_template, jinja=None):
    folder = os.path.join(root, "tokenizers", name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f, indent=2)
        f.write("\n")
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(chat_template), f, indent=2)
        f.write("\n")
    if jinja is not None:
        with open(os.path.join(folder, "chat_template.jinja"), "w") as f:
            f.write(jinja)


def main():
    root = os.path.join("tests", "assets")
    write_dataset(root)
    write_tokenizer(root, "char", None)
    write_tokenizer(root, "char_chat", CHAT_TEMPLATE)
    write_tokenizer(root, "char_jinja", STALE_TEMPLATE, JINJA_TEMPLATE)


if __name__ == "__main__":
    main()
