#!/usr/bin/env python3
"""Regenerates the chat-template goldens that tests/runtime/chat_template_test.cc and
tests/runtime/jinja_test.cc compare against byte for byte.

It renders with Debian's python3-jinja2 in exactly the environment transformers builds in
`_compile_jinja_template` (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[AssistantTracker, loopcontrols]) plus its `tojson`, `raise_exception` and
`strftime_now`), and calls the template the way `apply_chat_template` does: the tokenizer's
special_tokens_map, tools (None when absent), documents=None, extra variables, messages and
add_generation_prompt.
strftime_now uses a fixed clock (FIXED_NOW) so goldens are reproducible.

Inputs (all under tests/fixtures/chat/): templates.json (which templates: a tokenizer in the
cache of scripts/fetch-test-tokenizers.sh, or a committed .jinja file), conversations.json,
jinja_cases.json (engine-level snippets). Outputs: goldens.json, jinja_goldens.json.

Usage: scripts/make_chat_goldens.py [--tokenizer-dir DIR]
"""
import argparse
import datetime
import json
import os
import re
import sys

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "chat")
FIXED_NOW = datetime.datetime(2025, 3, 14, 9, 26, 53)


class GenerationExtension(jinja2.ext.Extension):
    """transformers' AssistantTracker as far as rendering goes: {% generation %}...{% endgeneration %}
    renders its body in place (the tracker only records where it was)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationExtension, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def token_text(value):
    """bos_token/eos_token in tokenizer_config.json: a string, an AddedToken dict, or null."""
    if isinstance(value, dict):
        return value.get("content")
    return value


SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def special_tokens_map(config):
    """transformers' tokenizer.special_tokens_map: set, non-empty special tokens as strings."""
    tokens = {}
    for name in SPECIAL_TOKENS:
        text = token_text(config.get(name))
        if text:
            tokens[name] = text
    additional = [token_text(t) for t in config.get("additional_special_tokens") or []]
    if additional:
        tokens["additional_special_tokens"] = additional
    return tokens


def load_tokenizer_template(directory):
    config_path = os.path.join(directory, "tokenizer_config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    # As in transformers, chat_template.jinja takes priority over the config entry.
    jinja_path = os.path.join(directory, "chat_template.jinja")
    if os.path.exists(jinja_path):
        with open(jinja_path, encoding="utf-8") as f:
            template = f.read()
    else:
        template = config.get("chat_template")
        if isinstance(template, list):
            template = {t["name"]: t["template"] for t in template}.get("default")
    if template is None:
        sys.exit(f"{directory}: no chat template")
    return template, special_tokens_map(config)


def load_templates(tokenizer_dir):
    with open(os.path.join(FIXTURES, "templates.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    templates = {}
    for name, spec in manifest.items():
        if "tokenizer" in spec:
            directory = os.path.join(tokenizer_dir, spec["tokenizer"])
            if not os.path.exists(os.path.join(directory, "tokenizer_config.json")):
                sys.exit(f"missing {directory}/tokenizer_config.json: run scripts/fetch-test-tokenizers.sh")
            templates[name] = load_tokenizer_template(directory)
        else:
            with open(os.path.join(FIXTURES, spec["file"]), encoding="utf-8") as f:
                templates[name] = (f.read(), {k: spec[k] for k in SPECIAL_TOKENS if spec.get(k)})
    return templates


def render(env, source, variables):
    try:
        # Printed objects show memory addresses; keep the goldens reproducible.
        return {"output": re.sub(r" at 0x[0-9a-f]+>", " at 0x...>", env.from_string(source).render(**variables))}
    except TemplateError as e:
        raised = type(e) is TemplateError  # raise_exception() raises the base class
        return {"error": f"{type(e).__name__}: {e}", "raised": raised, **({"message": str(e)} if raised else {})}
    except Exception as e:  # TypeError, ValueError, ... from Python operations
        return {"error": f"{type(e).__name__}: {e}", "raised": False}


def chat_goldens(env, templates):
    with open(os.path.join(FIXTURES, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    out = {
        "generator": "scripts/make_chat_goldens.py",
        "jinja2_version": jinja2.__version__,
        "strftime_now": FIXED_NOW.isoformat(),
        "templates": {n: t[0] for n, t in templates.items()},  # sources, to detect a changed cache
        "renders": {},
    }
    for name, (source, special_tokens) in templates.items():
        for conv in conversations:
            # apply_chat_template: special tokens first, then tools/documents, then kwargs.
            variables = dict(special_tokens)
            variables.update({"tools": None, "documents": None})
            variables.update(conv.get("vars", {}))
            variables["messages"] = conv["messages"]
            variables["add_generation_prompt"] = conv["add_generation_prompt"]
            out["renders"][f"{name}/{conv['name']}"] = render(env, source, variables)
    return out


def jinja_goldens(env):
    with open(os.path.join(FIXTURES, "jinja_cases.json"), encoding="utf-8") as f:
        spec = json.load(f)
    return {c["name"]: render(env, c["template"], c.get("vars", spec["default_vars"])) for c in spec["cases"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_dir = os.environ.get("DF11_TOKENIZER_DIR", os.path.expanduser("~/.cache/df11-serve/tokenizers"))
    parser.add_argument("--tokenizer-dir", default=default_dir)
    args = parser.parse_args()
    env = make_environment()
    for filename, data in (("goldens.json", chat_goldens(env, load_templates(args.tokenizer_dir))),
                           ("jinja_goldens.json", jinja_goldens(env))):
        with open(os.path.join(FIXTURES, filename), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"wrote tests/fixtures/chat/{filename}")


if __name__ == "__main__":
    main()
