#!/usr/bin/python3
# Renders every template here with every conversation of conversations.json the way Hugging Face's
# apply_chat_template does (jinja2's ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
# the loopcontrols extension, raise_exception, strftime_now and a tojson that is json.dumps with
# ensure_ascii=False), and writes expected.json for chat_template_test.cpp: for each template and
# conversation, the text, or the message the template raised, or that it fails by itself. Needs Debian's
# python3-jinja2. Run from this folder: /usr/bin/python3 make_expected.py
import glob
import json
import os

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Raised(Exception):
    pass


def raise_exception(message):
    raise Raised(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    # The date is left as a marker that the test replaces with its own strftime of today.
    env.globals["strftime_now"] = lambda f: "<strftime_now:" + f + ">"
    return env


SPECIAL = {"bos_token": "<s>", "eos_token": "</s>"}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    conversations = json.load(open(os.path.join(here, "conversations.json")))
    env = environment()
    out = {}
    for path in sorted(glob.glob(os.path.join(here, "*.jinja"))):
        name = os.path.basename(path)[:-len(".jinja")]
        template = env.from_string(open(path).read())
        out[name] = {}
        for key, conv in conversations.items():
            if key.startswith("_"):
                continue
            context = dict(SPECIAL, messages=conv["messages"],
                           add_generation_prompt=conv["add_generation_prompt"])
            if "tools" in conv:
                context["tools"] = conv["tools"]
            try:
                out[name][key] = {"text": template.render(**context)}
            except Raised as e:
                out[name][key] = {"raises": str(e)}
            except Exception as e:  # the template itself fails on this conversation
                out[name][key] = {"fails": f"{type(e).__name__}: {e}"}
    with open(os.path.join(here, "expected.json"), "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
