#pragma once
// The parts of the chat-template interpreter (jinja.h) shared by its lexer/parser, its evaluator
// and its builtins. Internal to core/serve.
#include "serve/jinja.h"

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace day0::serve::jinja {

/// What a node of the template's tree is.
enum class NodeKind {
    // statements
    Body, ///< children: statements in order
    Text, ///< text: the literal text
    Output, ///< children[0]: the expression printed
    If, ///< children: cond, body, cond, body, ... [, else body]
    For, ///< targets; children: iterable, body, else body (or null), filter (or null)
    Set, ///< text: target name; attr: namespace attribute or empty; children[0]: value
    SetBlock, ///< text: target name; children[0]: the body rendered into it
    Break,
    Continue,
    Generation, ///< children[0]: body (HF's {% generation %}, rendered as is)
    Macro, ///< text: name; targets: parameters; children: body, then each parameter's default
    ///< (or null)
    // expressions
    Literal, ///< value
    Name, ///< text
    Attr, ///< children[0]: object; text: attribute
    Item, ///< children: object, key
    Slice, ///< children: object, start, stop, step (each may be null)
    Call, ///< children: callee, positional args...; kwargs
    Filter, ///< text: filter; children: operand, args...; kwargs
    Test, ///< text: test; negated; children: operand, args...
    Not,
    Neg,
    Pos,
    Binary, ///< text: operator; children: left, right
    And,
    Or,
    Cond, ///< children: then, condition, else (or null)
    List, ///< children: items
    Tuple, ///< children: items
    Dict, ///< children: key, value, key, value, ...
};

struct Node {
    NodeKind kind = NodeKind::Body;
    int line = 0;
    std::string text;
    std::string attr;
    Json value;
    bool negated = false;
    std::vector<std::string> targets;
    std::vector<std::shared_ptr<Node>> children;
    std::vector<std::pair<std::string, std::shared_ptr<Node>>> kwargs;
};
using NodePtr = std::shared_ptr<Node>;

/// An error of the template, thrown inside the interpreter and returned by parse()/render().
struct TemplateError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// A value while rendering: JSON data, Jinja's Undefined, a namespace() (mutable, shared), or
/// a callable (a global function, or a method bound to its receiver).
struct Value {
    enum class Kind { Undefined, Data, Namespace, Function, Method, Macro };
    Kind kind = Kind::Undefined;
    Json data; ///< Data; Method: the receiver
    std::shared_ptr<Json> ns; ///< Namespace: its attributes (an object)
    std::string name; ///< Undefined: what was missing; Function / Method / Macro: its name
    const Node* macro = nullptr; ///< Macro: its definition (the template outlives the render)

    static Value undefined(std::string what)
    {
        return { Kind::Undefined, {}, {}, std::move(what) };
    }
    static Value of(Json j) { return { Kind::Data, std::move(j), {}, {} }; }
    [[nodiscard]] bool isUndefined() const { return kind == Kind::Undefined; }
    [[nodiscard]] bool isData() const { return kind == Kind::Data; }
};

/// Arguments of a call: positional, then keyword.
struct Args {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
};

/// Python's truthiness (Undefined and None are false).
bool truthy(const Value& v);
/// Jinja's str(): strings as they are, None as "None", True/False, floats as Python's repr,
/// lists and dicts as Python's repr, Undefined as "".
std::string toString(const Value& v);
/// Python's repr of JSON data.
std::string pythonRepr(const Json& j);
/// HF's tojson: json.dumps(x, ensure_ascii=False, indent=indent) (indent < 0: none).
std::string toJson(const Json& j, int indent);
/// The items a for loop visits (lists; a dict's keys; a string's characters; Undefined: none).
std::vector<Json> iterate(const Value& v);
/// A string's characters (UTF-8 code points).
std::vector<std::string> characters(const std::string& s);

// Helpers shared by the builtins (jinja_builtins.cpp) and the filters (jinja_filters.cpp).
/// `v`'s data, else a TemplateError saying `what` needs a value.
const Json& dataOf(const Value& v, const std::string& what);
/// `v`'s string, else a TemplateError.
std::string stringOf(const Value& v, const std::string& what);
/// Positional argument i, else keyword `name`, else null.
const Value* argument(const Args& args, std::size_t i, const char* name);
bool isBlank(char c);
/// Python's str.strip / lstrip / rstrip (whitespace, or the characters of `chars`).
std::string strip(const std::string& s, const Value* chars, bool left, bool right);
std::string upper(std::string s);
std::string lower(std::string s);
/// Python's str.replace (count < 0: all).
std::string replaceAll(
    std::string s, const std::string& from, const std::string& to, std::int64_t count);
/// Python's str.split (no separator: runs of whitespace; maxSplit < 0: all).
Json split(const std::string& s, const Value* sep, std::int64_t maxSplit);
/// A dict's items as [[key, value], ...].
Json itemsOf(const Json& j);

/// The builtins (jinja_builtins.cpp, jinja_filters.cpp); each throws TemplateError naming what
/// is not implemented.
Value applyFilter(const std::string& name, const Value& operand, const Args& args);
bool applyTest(const std::string& name, const Value& operand, const Args& args);
Value callFunction(const std::string& name, const Args& args);
Value callMethod(const Json& receiver, const std::string& name, const Args& args);
/// Whether `name` is a method of `receiver`'s type (dict.items, str.strip, ...).
bool hasMethod(const Json& receiver, const std::string& name);
/// Names the global functions (raise_exception, namespace, range, strftime_now).
bool isGlobalFunction(const std::string& name);

/// A token of a template: text between tags, a tag's delimiters, or a token inside a tag.
enum class Tok {
    Text,
    VarBegin,
    VarEnd,
    BlockBegin,
    BlockEnd,
    Name,
    String,
    Integer,
    Float,
    Op,
    End
};

struct Token {
    Tok kind = Tok::End;
    std::string text;
    Json value;
    int line = 1;
};

/// Splits a template (newlines already normalised) into tokens (jinja_lexer.cpp).
std::vector<Token> lexTemplate(std::string source);

/// Parses a template into its tree (jinja_parse.cpp).
NodePtr parseTemplate(std::string_view source);

} // namespace day0::serve::jinja
