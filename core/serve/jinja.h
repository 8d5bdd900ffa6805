#pragma once

#include "base/result.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace day0::serve::jinja {

/// Values a template sees: JSON with its keys in insertion order, as Python's dicts keep them.
using Json = nlohmann::ordered_json;

struct Node;

/// A Jinja2 template as Hugging Face's apply_chat_template renders one: an
/// ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks on, the loopcontrols
/// extension ({% break %}, {% continue %}) and {% generation %} blocks (rendered as their body),
/// the default Undefined (prints as nothing, is false, fails on attribute access) and HF's
/// globals raise_exception and strftime_now and its tojson (Python json.dumps with
/// ensure_ascii=False).
///
/// The subset interpreted (what chat templates use): text, {{ }}, {# #}, whitespace control
/// (- and +); statements if/elif/else, for (with tuple targets, an `if` filter, else, the loop
/// variable: index, index0, revindex, revindex0, first, last, length, previtem, nextitem), set
/// (a name, a namespace attribute, or a block), macro (parameters with defaults; the body sees
/// the template's top-level names), break, continue, generation; expressions:
/// literals (strings, numbers, true/false/none in both cases, lists, tuples, dicts), names,
/// .attr, [key], slices, calls, filters, tests, `a if c else b`, and, or, not, in, not in,
/// == != < <= > >=, + - * / // % **, ~. The filters, tests, globals and string/dict methods
/// implemented are listed in jinja_builtins.cpp and jinja_filters.cpp. Anything else (call,
/// include, import, extends, block, raw, filter blocks, an unknown filter, test, function or
/// method) is refused by name: at parse time for statements, at render time for the rest.
/// Thread-safe after parse: render only reads the template.
class Template {
public:
    /// Parses `source`; errors give the line and the construct.
    static Result<Template> parse(std::string_view source);
    /// Renders with `context`'s keys as the template's variables (a JSON object).
    [[nodiscard]] Result<std::string> render(const Json& context) const;

private:
    std::shared_ptr<const Node> m_root;
};

} // namespace day0::serve::jinja
