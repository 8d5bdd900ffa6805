// The evaluator of the chat-template interpreter (jinja.h): statements, expressions, scopes.
#include "serve/jinja_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace day0::serve::jinja {

namespace {

struct BreakLoop { };
struct ContinueLoop { };

[[noreturn]] void fail(const Node& n, const std::string& what)
{
    throw TemplateError(fmt::format("chat template line {}: {}", n.line, what));
}

bool isNumber(const Value& v) { return v.isData() && v.data.is_number(); }
bool isInteger(const Value& v) { return v.isData() && v.data.is_number_integer(); }
double asDouble(const Value& v) { return v.data.get<double>(); }
std::int64_t asInt(const Value& v) { return v.data.get<std::int64_t>(); }

std::string typeName(const Value& v)
{
    switch (v.kind) {
    case Value::Kind::Undefined:
        return "undefined";
    case Value::Kind::Namespace:
        return "namespace";
    case Value::Kind::Function:
    case Value::Kind::Method:
        return "function";
    case Value::Kind::Data:
        break;
    }
    if (v.data.is_string()) {
        return "str";
    }
    if (v.data.is_number_integer()) {
        return "int";
    }
    if (v.data.is_number_float()) {
        return "float";
    }
    if (v.data.is_boolean()) {
        return "bool";
    }
    if (v.data.is_null()) {
        return "NoneType";
    }
    return v.data.is_array() ? "list" : "dict";
}

bool equal(const Value& a, const Value& b)
{
    if (a.isUndefined() || b.isUndefined()) {
        return a.isUndefined() && b.isUndefined();
    }
    if (a.kind == Value::Kind::Namespace || b.kind == Value::Kind::Namespace) {
        return a.ns == b.ns;
    }
    if (!a.isData() || !b.isData()) {
        return false;
    }
    // Python: True == 1, but JSON keeps booleans apart; templates compare like types.
    if (a.data.is_number() && b.data.is_number()) {
        return asDouble(a) == asDouble(b);
    }
    return a.data == b.data;
}

/// Python's floor division and modulo.
Value arithmetic(const Node& n, const std::string& op, const Value& a, const Value& b)
{
    if (!isNumber(a) || !isNumber(b)) {
        if (op == "*" && a.isData() && b.isData()
            && ((a.data.is_string() && b.data.is_number_integer())
                || (b.data.is_string() && a.data.is_number_integer()))) {
            const Value& text = a.data.is_string() ? a : b;
            const Value& times = a.data.is_string() ? b : a;
            std::string out;
            for (std::int64_t i = 0; i < times.data.get<std::int64_t>(); ++i) {
                out += text.data.get<std::string>();
            }
            return Value::of(out);
        }
        if (op == "%" && a.isData() && a.data.is_string()) {
            fail(n, "printf-style string formatting (str % values) is not implemented");
        }
        fail(n,
            fmt::format(
                "unsupported operand types for {}: '{}' and '{}'", op, typeName(a), typeName(b)));
    }
    const bool ints = isInteger(a) && isInteger(b);
    if (op == "/") {
        if (asDouble(b) == 0.0) {
            fail(n, "division by zero");
        }
        return Value::of(asDouble(a) / asDouble(b));
    }
    if (op == "**") {
        if (ints && asInt(b) >= 0) {
            std::int64_t r = 1;
            for (std::int64_t i = 0; i < asInt(b); ++i) {
                r *= asInt(a);
            }
            return Value::of(r);
        }
        return Value::of(std::pow(asDouble(a), asDouble(b)));
    }
    if (ints) {
        const std::int64_t x = asInt(a);
        const std::int64_t y = asInt(b);
        if (op == "+") {
            return Value::of(x + y);
        }
        if (op == "-") {
            return Value::of(x - y);
        }
        if (op == "*") {
            return Value::of(x * y);
        }
        if (y == 0) {
            fail(n, "integer division or modulo by zero");
        }
        std::int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) {
            --q;
        }
        return Value::of(op == "//" ? q : x - q * y);
    }
    const double x = asDouble(a);
    const double y = asDouble(b);
    if (op == "+") {
        return Value::of(x + y);
    }
    if (op == "-") {
        return Value::of(x - y);
    }
    if (op == "*") {
        return Value::of(x * y);
    }
    if (y == 0.0) {
        fail(n, "float division or modulo by zero");
    }
    const double q = std::floor(x / y);
    return Value::of(op == "//" ? q : x - q * y);
}

class Renderer {
public:
    explicit Renderer(const Json& context)
    {
        m_scopes.emplace_back();
        for (const auto& [key, value] : context.items()) {
            m_scopes.back()[key] = Value::of(value);
        }
    }

    void render(const Node& n, std::string& out)
    {
        switch (n.kind) {
        case NodeKind::Body:
            for (const auto& c : n.children) {
                render(*c, out);
            }
            return;
        case NodeKind::Text:
            out += n.text;
            return;
        case NodeKind::Output:
            out += toString(eval(*n.children[0]));
            return;
        case NodeKind::If:
            for (std::size_t i = 0; i + 1 < n.children.size(); i += 2) {
                if (truthy(eval(*n.children[i]))) {
                    render(*n.children[i + 1], out);
                    return;
                }
            }
            if (n.children.size() % 2 == 1) {
                render(*n.children.back(), out);
            }
            return;
        case NodeKind::For:
            renderFor(n, out);
            return;
        case NodeKind::Set:
            assign(n, eval(*n.children[0]));
            return;
        case NodeKind::SetBlock: {
            std::string captured;
            render(*n.children[0], captured);
            assign(n, Value::of(captured));
            return;
        }
        case NodeKind::Break:
            throw BreakLoop {};
        case NodeKind::Continue:
            throw ContinueLoop {};
        case NodeKind::Generation:
            render(*n.children[0], out);
            return;
        case NodeKind::Macro: {
            Value macro;
            macro.kind = Value::Kind::Macro;
            macro.name = n.text;
            macro.macro = &n;
            m_scopes.back()[n.text] = macro;
            return;
        }
        default:
            fail(n, "an expression where a statement was expected");
        }
    }

private:
    Value lookup(const std::string& name) const
    {
        for (auto it = m_scopes.rbegin(); it != m_scopes.rend(); ++it) {
            if (const auto found = it->find(name); found != it->end()) {
                return found->second;
            }
        }
        if (isGlobalFunction(name)) {
            return { Value::Kind::Function, {}, {}, name };
        }
        return Value::undefined(name);
    }

    void assign(const Node& n, Value v)
    {
        if (n.attr.empty()) {
            m_scopes.back()[n.text] = std::move(v);
            return;
        }
        const Value target = lookup(n.text);
        if (target.kind != Value::Kind::Namespace) {
            fail(n,
                fmt::format("cannot set '{}.{}': '{}' is a {}, not a namespace()", n.text, n.attr,
                    n.text, typeName(target)));
        }
        if (v.kind != Value::Kind::Data && !v.isUndefined()) {
            fail(n, "only data can be stored in a namespace");
        }
        (*target.ns)[n.attr] = v.data;
    }

    void renderFor(const Node& n, std::string& out)
    {
        std::vector<Json> items = iterate(eval(*n.children[0]));
        const auto bind = [&](const Json& item) {
            if (n.targets.size() == 1) {
                m_scopes.back()[n.targets[0]] = Value::of(item);
                return;
            }
            if (!item.is_array() || item.size() != n.targets.size()) {
                fail(n,
                    fmt::format(
                        "cannot unpack {} into {} names", pythonRepr(item), n.targets.size()));
            }
            for (std::size_t i = 0; i < n.targets.size(); ++i) {
                m_scopes.back()[n.targets[i]] = Value::of(item[i]);
            }
        };
        m_scopes.emplace_back();
        if (n.children[3]) {
            std::vector<Json> kept;
            for (const auto& item : items) {
                bind(item);
                if (truthy(eval(*n.children[3]))) {
                    kept.push_back(item);
                }
            }
            items = std::move(kept);
        }
        const auto length = std::int64_t(items.size());
        for (std::int64_t i = 0; i < length; ++i) {
            bind(items[std::size_t(i)]);
            Json loop = { { "index0", i }, { "index", i + 1 }, { "revindex", length - i },
                { "revindex0", length - i - 1 }, { "first", i == 0 }, { "last", i + 1 == length },
                { "length", length } };
            if (i > 0) {
                loop["previtem"] = items[std::size_t(i - 1)];
            }
            if (i + 1 < length) {
                loop["nextitem"] = items[std::size_t(i + 1)];
            }
            m_scopes.back()["loop"] = Value::of(std::move(loop));
            try {
                render(*n.children[1], out);
            } catch (const ContinueLoop&) {
                continue;
            } catch (const BreakLoop&) {
                break;
            }
        }
        m_scopes.pop_back();
        if (items.empty() && n.children[2]) {
            render(*n.children[2], out);
        }
    }

    Args evalArgs(const Node& n, std::size_t first)
    {
        Args args;
        for (std::size_t i = first; i < n.children.size(); ++i) {
            args.positional.push_back(eval(*n.children[i]));
        }
        for (const auto& [key, expr] : n.kwargs) {
            args.keyword.emplace_back(key, eval(*expr));
        }
        return args;
    }

    Value getAttr(const Node& n, const Value& object, const std::string& name)
    {
        if (object.isUndefined()) {
            fail(n,
                fmt::format("'{}' is undefined, so it has no attribute '{}'", object.name, name));
        }
        if (object.kind == Value::Kind::Namespace) {
            return object.ns->contains(name) ? Value::of((*object.ns)[name])
                                             : Value::undefined(name);
        }
        if (!object.isData()) {
            fail(n, fmt::format("a {} has no attribute '{}'", typeName(object), name));
        }
        if (object.data.is_object() && object.data.contains(name)) {
            return Value::of(object.data[name]);
        }
        if (hasMethod(object.data, name)) {
            return { Value::Kind::Method, object.data, {}, name };
        }
        return Value::undefined(name);
    }

    Value getItem(const Node& n, const Value& object, const Value& key)
    {
        if (object.isUndefined()) {
            fail(n, fmt::format("'{}' is undefined, so it cannot be subscripted", object.name));
        }
        if (object.kind == Value::Kind::Namespace && key.isData() && key.data.is_string()) {
            return getAttr(n, object, key.data.get<std::string>());
        }
        if (!object.isData() || !key.isData()) {
            fail(n,
                fmt::format("a {} cannot be subscripted by a {}", typeName(object), typeName(key)));
        }
        const Json& o = object.data;
        if (o.is_object()) {
            if (key.data.is_string() && o.contains(key.data.get<std::string>())) {
                return Value::of(o[key.data.get<std::string>()]);
            }
            return key.data.is_string() ? Value::undefined(key.data.get<std::string>())
                                        : Value::undefined(key.data.dump());
        }
        if ((o.is_array() || o.is_string()) && key.data.is_number_integer()) {
            const std::vector<std::string> chars
                = o.is_string() ? characters(o.get<std::string>()) : std::vector<std::string>();
            const auto size = std::int64_t(o.is_array() ? o.size() : chars.size());
            std::int64_t i = key.data.get<std::int64_t>();
            i = i < 0 ? i + size : i;
            if (i < 0 || i >= size) {
                return Value::undefined(fmt::format("index {}", key.data.get<std::int64_t>()));
            }
            return o.is_array() ? Value::of(o[std::size_t(i)]) : Value::of(chars[std::size_t(i)]);
        }
        fail(n, fmt::format("a {} cannot be subscripted by a {}", typeName(object), typeName(key)));
    }

    Value slice(const Node& n, const Value& object)
    {
        if (!object.isData() || !(object.data.is_array() || object.data.is_string())) {
            fail(n, fmt::format("a {} cannot be sliced", typeName(object)));
        }
        std::vector<Json> items;
        if (object.data.is_array()) {
            items.assign(object.data.begin(), object.data.end());
        } else {
            for (auto& c : characters(object.data.get<std::string>())) {
                items.emplace_back(std::move(c));
            }
        }
        const auto size = std::int64_t(items.size());
        const auto part = [&](std::size_t i) -> std::optional<std::int64_t> {
            if (!n.children[i]) {
                return std::nullopt;
            }
            const Value v = eval(*n.children[i]);
            if (v.isData() && v.data.is_null()) {
                return std::nullopt;
            }
            if (!isInteger(v)) {
                fail(n, "slice indices must be integers");
            }
            return asInt(v);
        };
        const std::int64_t step = part(3).value_or(1);
        if (step == 0) {
            fail(n, "a slice step cannot be zero");
        }
        const auto clamp = [&](std::optional<std::int64_t> v, std::int64_t dflt) {
            if (!v) {
                return dflt;
            }
            std::int64_t x = *v < 0 ? *v + size : *v;
            return step > 0 ? std::clamp<std::int64_t>(x, 0, size)
                            : std::clamp<std::int64_t>(x, -1, size - 1);
        };
        const std::int64_t start = clamp(part(1), step > 0 ? 0 : size - 1);
        const std::int64_t stop = clamp(part(2), step > 0 ? size : -1);
        Json out = Json::array();
        for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            out.push_back(items[std::size_t(i)]);
        }
        if (object.data.is_string()) {
            std::string s;
            for (const auto& c : out) {
                s += c.get<std::string>();
            }
            return Value::of(s);
        }
        return Value::of(out);
    }

    Value call(const Node& n)
    {
        const Value callee = eval(*n.children[0]);
        const Args args = evalArgs(n, 1);
        if (callee.kind == Value::Kind::Macro) {
            return callMacro(n, *callee.macro, args);
        }
        try {
            if (callee.kind == Value::Kind::Function) {
                return callFunction(callee.name, args);
            }
            if (callee.kind == Value::Kind::Method) {
                return callMethod(callee.data, callee.name, args);
            }
        } catch (const TemplateError& e) {
            fail(n, e.what());
        }
        if (callee.isUndefined()) {
            fail(n,
                fmt::format(
                    "'{}' is not a function day0's chat-template interpreter knows", callee.name));
        }
        fail(n, fmt::format("a {} is not callable", typeName(callee)));
    }

    /// A macro's body rendered with its parameters bound, seeing the template's top-level
    /// names (not the caller's locals), as Jinja's macros do.
    Value callMacro(const Node& call, const Node& macro, const Args& args)
    {
        if (args.positional.size() > macro.targets.size()) {
            fail(call,
                fmt::format("macro '{}' takes {} arguments, got {}", macro.text,
                    macro.targets.size(), args.positional.size()));
        }
        std::map<std::string, Value> params;
        for (std::size_t i = 0; i < macro.targets.size(); ++i) {
            if (i < args.positional.size()) {
                params[macro.targets[i]] = args.positional[i];
            }
        }
        for (const auto& [key, value] : args.keyword) {
            if (std::find(macro.targets.begin(), macro.targets.end(), key) == macro.targets.end()) {
                fail(call, fmt::format("macro '{}' has no parameter '{}'", macro.text, key));
            }
            params[key] = value;
        }
        std::vector<std::map<std::string, Value>> saved = std::move(m_scopes);
        m_scopes = { saved.front(), {} };
        for (std::size_t i = 0; i < macro.targets.size(); ++i) {
            if (!params.contains(macro.targets[i])) {
                params[macro.targets[i]] = macro.children[i + 1]
                    ? eval(*macro.children[i + 1])
                    : Value::undefined(macro.targets[i]);
            }
        }
        m_scopes.back() = std::move(params);
        std::string out;
        try {
            render(*macro.children[0], out);
        } catch (...) {
            m_scopes = std::move(saved);
            throw;
        }
        m_scopes = std::move(saved);
        return Value::of(out);
    }

    Value binary(const Node& n)
    {
        const std::string& op = n.text;
        const Value a = eval(*n.children[0]);
        const Value b = eval(*n.children[1]);
        if (op == "==") {
            return Value::of(equal(a, b));
        }
        if (op == "!=") {
            return Value::of(!equal(a, b));
        }
        if (op == "~") {
            return Value::of(toString(a) + toString(b));
        }
        if (op == "in" || op == "not in") {
            bool found = false;
            if (b.isData() && b.data.is_string()) {
                if (!a.isData() || !a.data.is_string()) {
                    fail(n,
                        fmt::format(
                            "'in <string>' needs a string on the left, not a {}", typeName(a)));
                }
                found = b.data.get<std::string>().find(a.data.get<std::string>())
                    != std::string::npos;
            } else if (b.isData() && b.data.is_object()) {
                found = a.isData() && a.data.is_string()
                    && b.data.contains(a.data.get<std::string>());
            } else if (b.isUndefined() || (b.isData() && b.data.is_array())) {
                for (const auto& item : iterate(b)) {
                    found = found || equal(a, Value::of(item));
                }
            } else {
                fail(n, fmt::format("a {} is not a container for 'in'", typeName(b)));
            }
            return Value::of(op == "in" ? found : !found);
        }
        if (op == "<" || op == "<=" || op == ">" || op == ">=") {
            int cmp = 0;
            if (isNumber(a) && isNumber(b)) {
                cmp = asDouble(a) < asDouble(b) ? -1 : (asDouble(a) > asDouble(b) ? 1 : 0);
            } else if (a.isData() && b.isData() && a.data.is_string() && b.data.is_string()) {
                cmp = a.data.get<std::string>().compare(b.data.get<std::string>());
            } else {
                fail(n,
                    fmt::format("'{}' is not supported between a {} and a {}", op, typeName(a),
                        typeName(b)));
            }
            return Value::of(op == "<" ? cmp < 0
                    : op == "<="       ? cmp <= 0
                    : op == ">"        ? cmp > 0
                                       : cmp >= 0);
        }
        if (op == "+" && a.isData() && b.isData()) {
            if (a.data.is_string() && b.data.is_string()) {
                return Value::of(a.data.get<std::string>() + b.data.get<std::string>());
            }
            if (a.data.is_array() && b.data.is_array()) {
                Json out = a.data;
                for (const auto& x : b.data) {
                    out.push_back(x);
                }
                return Value::of(out);
            }
        }
        return arithmetic(n, op, a, b);
    }

public:
    Value eval(const Node& n)
    {
        switch (n.kind) {
        case NodeKind::Literal:
            return Value::of(n.value);
        case NodeKind::Name:
            return lookup(n.text);
        case NodeKind::Attr:
            return getAttr(n, eval(*n.children[0]), n.text);
        case NodeKind::Item:
            return getItem(n, eval(*n.children[0]), eval(*n.children[1]));
        case NodeKind::Slice:
            return slice(n, eval(*n.children[0]));
        case NodeKind::Call:
            return call(n);
        case NodeKind::Filter: {
            const Value operand = eval(*n.children[0]);
            try {
                return applyFilter(n.text, operand, evalArgs(n, 1));
            } catch (const TemplateError& e) {
                fail(n, e.what());
            }
        }
        case NodeKind::Test: {
            const Value operand = eval(*n.children[0]);
            try {
                return Value::of(applyTest(n.text, operand, evalArgs(n, 1)) != n.negated);
            } catch (const TemplateError& e) {
                fail(n, e.what());
            }
        }
        case NodeKind::Not:
            return Value::of(!truthy(eval(*n.children[0])));
        case NodeKind::Neg:
        case NodeKind::Pos: {
            const Value v = eval(*n.children[0]);
            if (!isNumber(v)) {
                fail(n,
                    fmt::format("bad operand type for unary {}: '{}'",
                        n.kind == NodeKind::Neg ? "-" : "+", typeName(v)));
            }
            if (n.kind == NodeKind::Pos) {
                return v;
            }
            return isInteger(v) ? Value::of(-asInt(v)) : Value::of(-asDouble(v));
        }
        case NodeKind::Binary:
            return binary(n);
        case NodeKind::And: {
            Value a = eval(*n.children[0]);
            return truthy(a) ? eval(*n.children[1]) : a;
        }
        case NodeKind::Or: {
            Value a = eval(*n.children[0]);
            return truthy(a) ? a : eval(*n.children[1]);
        }
        case NodeKind::Cond:
            if (truthy(eval(*n.children[1]))) {
                return eval(*n.children[0]);
            }
            return n.children[2] ? eval(*n.children[2]) : Value::undefined("the else branch");
        case NodeKind::List:
        case NodeKind::Tuple: {
            Json out = Json::array();
            for (const auto& c : n.children) {
                const Value v = eval(*c);
                if (!v.isData()) {
                    fail(n, fmt::format("a {} cannot be put in a list", typeName(v)));
                }
                out.push_back(v.data);
            }
            return Value::of(out);
        }
        case NodeKind::Dict: {
            Json out = Json::object();
            for (std::size_t i = 0; i + 1 < n.children.size(); i += 2) {
                const Value k = eval(*n.children[i]);
                const Value v = eval(*n.children[i + 1]);
                if (!k.isData() || !k.data.is_string() || !v.isData()) {
                    fail(n, "dict literals need string keys and data values");
                }
                out[k.data.get<std::string>()] = v.data;
            }
            return Value::of(out);
        }
        default:
            fail(n, "a statement where an expression was expected");
        }
    }

private:
    std::vector<std::map<std::string, Value>> m_scopes;
};

} // namespace

Result<Template> Template::parse(std::string_view source)
{
    try {
        Template t;
        t.m_root = parseTemplate(source);
        return t;
    } catch (const TemplateError& e) {
        return Error::badInput(e.what());
    }
}

Result<std::string> Template::render(const Json& context) const
{
    try {
        Renderer r(context);
        std::string out;
        r.render(*m_root, out);
        return out;
    } catch (const TemplateError& e) {
        return Error::badInput(e.what());
    } catch (const BreakLoop&) {
        return Error::badInput("chat template: {% break %} outside a for loop");
    } catch (const ContinueLoop&) {
        return Error::badInput("chat template: {% continue %} outside a for loop");
    } catch (const Json::exception& e) {
        return Error::badInput(fmt::format("chat template: {}", e.what()));
    }
}

} // namespace day0::serve::jinja
