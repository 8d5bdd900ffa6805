// The builtins of the chat-template interpreter (jinja.h): value conversions, HF's tojson, and
// the filters, tests, global functions and Python str/dict methods that chat templates use.
// Every other name is refused with TemplateError naming it.
#include "serve/jinja_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace day0::serve::jinja {

namespace {

[[noreturn]] void fail(const std::string& what) { throw TemplateError(what); }

} // namespace

const Json& dataOf(const Value& v, const std::string& what)
{
    if (!v.isData()) {
        fail(fmt::format("{} needs a value, got {}", what,
            v.isUndefined() ? "undefined '" + v.name + "'" : std::string("a function")));
    }
    return v.data;
}

std::string stringOf(const Value& v, const std::string& what)
{
    const Json& j = dataOf(v, what);
    if (!j.is_string()) {
        fail(fmt::format("{} needs a string, got {}", what, pythonRepr(j)));
    }
    return j.get<std::string>();
}

/// Positional argument i, else keyword `name`, else none.
const Value* argument(const Args& args, std::size_t i, const char* name)
{
    if (i < args.positional.size()) {
        return &args.positional[i];
    }
    for (const auto& [key, value] : args.keyword) {
        if (key == name) {
            return &value;
        }
    }
    return nullptr;
}

bool isBlank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string strip(const std::string& s, const Value* chars, bool left, bool right)
{
    const auto drop = [&](char c) {
        if (chars == nullptr || (chars->isData() && chars->data.is_null())) {
            return isBlank(c);
        }
        return stringOf(*chars, "strip").find(c) != std::string::npos;
    };
    std::size_t b = 0;
    std::size_t e = s.size();
    while (left && b < e && drop(s[b])) {
        ++b;
    }
    while (right && e > b && drop(s[e - 1])) {
        --e;
    }
    return s.substr(b, e - b);
}

std::string upper(std::string s)
{
    std::transform(
        s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::toupper(c)); });
    return s;
}

std::string lower(std::string s)
{
    std::transform(
        s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

std::string replaceAll(
    std::string s, const std::string& from, const std::string& to, std::int64_t count)
{
    if (from.empty()) {
        fail("replace() with an empty string to find is not implemented");
    }
    std::size_t at = 0;
    for (std::int64_t n = 0;
         (count < 0 || n < count) && (at = s.find(from, at)) != std::string::npos; ++n) {
        s.replace(at, from.size(), to);
        at += to.size();
    }
    return s;
}

Json split(const std::string& s, const Value* sep, std::int64_t maxSplit)
{
    Json out = Json::array();
    if (sep == nullptr || (sep->isData() && sep->data.is_null())) {
        // Python's split(): runs of whitespace, no empty pieces.
        std::size_t i = 0;
        std::int64_t n = 0;
        while (i < s.size()) {
            while (i < s.size() && isBlank(s[i])) {
                ++i;
            }
            if (i >= s.size()) {
                break;
            }
            if (maxSplit >= 0 && n == maxSplit) {
                out.push_back(strip(s.substr(i), nullptr, false, true));
                break;
            }
            std::size_t j = i;
            while (j < s.size() && !isBlank(s[j])) {
                ++j;
            }
            out.push_back(s.substr(i, j - i));
            ++n;
            i = j;
        }
        return out;
    }
    const std::string d = stringOf(*sep, "split");
    if (d.empty()) {
        fail("split() with an empty separator");
    }
    std::size_t start = 0;
    std::size_t at = 0;
    std::int64_t n = 0;
    while ((maxSplit < 0 || n < maxSplit) && (at = s.find(d, start)) != std::string::npos) {
        out.push_back(s.substr(start, at - start));
        start = at + d.size();
        ++n;
    }
    out.push_back(s.substr(start));
    return out;
}

namespace {

std::string pythonFloat(double x)
{
    if (std::isnan(x)) {
        return "nan";
    }
    if (std::isinf(x)) {
        return x > 0 ? "inf" : "-inf";
    }
    // The shortest digits that give x back, laid out as Python's repr does: positional for
    // exponents -4..15, else d.ddde±XX.
    char buf[40];
    int precision = 1;
    for (; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof buf, "%.*e", precision - 1, x);
        if (std::strtod(buf, nullptr) == x) {
            break;
        }
    }
    std::string s(buf);
    const std::size_t e = s.find('e');
    std::string mantissa = s.substr(0, e);
    const int exponent = std::stoi(s.substr(e + 1));
    const bool negative = mantissa[0] == '-';
    std::string digits;
    for (const char c : mantissa) {
        if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
            digits += c;
        }
    }
    while (digits.size() > 1 && digits.back() == '0') {
        digits.pop_back();
    }
    std::string out = negative ? "-" : "";
    if (exponent >= -5 + 1 && exponent < 16) {
        if (exponent >= 0) {
            std::string whole
                = digits.substr(0, std::min<std::size_t>(digits.size(), std::size_t(exponent) + 1));
            whole.append(std::size_t(exponent) + 1 - whole.size(), '0');
            const std::string frac = digits.size() > std::size_t(exponent) + 1
                ? digits.substr(std::size_t(exponent) + 1)
                : "0";
            out += whole + "." + frac;
        } else {
            out += "0." + std::string(std::size_t(-exponent - 1), '0') + digits;
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1) {
        out += "." + digits.substr(1);
    }
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out;
}

std::string quoteRepr(const std::string& s)
{
    const bool useDouble = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
    const char q = useDouble ? '"' : '\'';
    std::string out(1, q);
    for (const char c : s) {
        switch (c) {
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        default:
            if (c == q) {
                out += '\\';
                out += c;
            } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
                out += fmt::format("\\x{:02x}", int(static_cast<unsigned char>(c)));
            } else {
                out += c;
            }
        }
    }
    out += q;
    return out;
}

/// A JSON string literal as Python's json.dumps(ensure_ascii=False) writes it: nlohmann's dump
/// escapes the same characters the same way (\" \\ \b \f \n \r \t, other controls as \u00xx).
std::string jsonString(const std::string& s)
{
    return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
}

void dumpJson(const Json& j, int indent, int depth, std::string& out)
{
    const auto newline = [&](int d) {
        if (indent >= 0) {
            out += '\n';
            out.append(std::size_t(indent * d), ' ');
        }
    };
    const char* comma = indent >= 0 ? "," : ", ";
    if (j.is_object()) {
        if (j.empty()) {
            out += "{}";
            return;
        }
        out += '{';
        bool first = true;
        for (const auto& [k, v] : j.items()) {
            out += first ? "" : comma;
            first = false;
            newline(depth + 1);
            out += jsonString(k) + ": ";
            dumpJson(v, indent, depth + 1, out);
        }
        newline(depth);
        out += '}';
    } else if (j.is_array()) {
        if (j.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        bool first = true;
        for (const auto& v : j) {
            out += first ? "" : comma;
            first = false;
            newline(depth + 1);
            dumpJson(v, indent, depth + 1, out);
        }
        newline(depth);
        out += ']';
    } else if (j.is_string()) {
        out += jsonString(j.get<std::string>());
    } else if (j.is_number_float()) {
        const double x = j.get<double>();
        out += std::isnan(x) ? "NaN"
            : std::isinf(x)  ? (x > 0 ? "Infinity" : "-Infinity")
                             : pythonFloat(x);
    } else {
        out += j.dump(); // integers, true, false, null
    }
}

} // namespace

Json itemsOf(const Json& j)
{
    Json out = Json::array();
    for (const auto& [k, v] : j.items()) {
        out.push_back(Json::array({ k, v }));
    }
    return out;
}

std::vector<std::string> characters(const std::string& s)
{
    std::vector<std::string> out;
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const std::size_t n = c < 0x80 ? 1
            : (c >> 5) == 6            ? 2
            : (c >> 4) == 14           ? 3
            : (c >> 3) == 30           ? 4
                                       : 1;
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

bool truthy(const Value& v)
{
    switch (v.kind) {
    case Value::Kind::Undefined:
        return false;
    case Value::Kind::Data:
        break;
    default:
        return true;
    }
    const Json& j = v.data;
    if (j.is_null()) {
        return false;
    }
    if (j.is_boolean()) {
        return j.get<bool>();
    }
    if (j.is_number()) {
        return j.get<double>() != 0.0;
    }
    if (j.is_string()) {
        return !j.get<std::string>().empty();
    }
    return !j.empty();
}

std::string pythonRepr(const Json& j)
{
    if (j.is_string()) {
        return quoteRepr(j.get<std::string>());
    }
    if (j.is_null()) {
        return "None";
    }
    if (j.is_boolean()) {
        return j.get<bool>() ? "True" : "False";
    }
    if (j.is_number_float()) {
        return pythonFloat(j.get<double>());
    }
    if (j.is_array()) {
        std::string out = "[";
        for (std::size_t i = 0; i < j.size(); ++i) {
            out += (i ? ", " : "") + pythonRepr(j[i]);
        }
        return out + "]";
    }
    if (j.is_object()) {
        std::string out = "{";
        bool first = true;
        for (const auto& [k, v] : j.items()) {
            out += (first ? "" : ", ") + quoteRepr(k) + ": " + pythonRepr(v);
            first = false;
        }
        return out + "}";
    }
    return j.dump();
}

std::string toString(const Value& v)
{
    if (v.isUndefined()) {
        return {};
    }
    if (v.kind == Value::Kind::Namespace) {
        return "<Namespace " + pythonRepr(*v.ns) + ">";
    }
    if (!v.isData()) {
        return "<function " + v.name + ">";
    }
    return v.data.is_string() ? v.data.get<std::string>() : pythonRepr(v.data);
}

std::string toJson(const Json& j, int indent)
{
    std::string out;
    dumpJson(j, indent, 0, out);
    return out;
}

std::vector<Json> iterate(const Value& v)
{
    if (v.isUndefined()) {
        return {};
    }
    const Json& j = dataOf(v, "iteration");
    std::vector<Json> out;
    if (j.is_array()) {
        out.assign(j.begin(), j.end());
    } else if (j.is_object()) {
        for (const auto& [k, value] : j.items()) {
            out.emplace_back(k);
        }
    } else if (j.is_string()) {
        for (auto& c : characters(j.get<std::string>())) {
            out.emplace_back(std::move(c));
        }
    } else {
        fail(fmt::format("{} is not iterable", pythonRepr(j)));
    }
    return out;
}

bool isGlobalFunction(const std::string& name)
{
    return name == "raise_exception" || name == "namespace" || name == "range"
        || name == "strftime_now";
}

Value callFunction(const std::string& name, const Args& args)
{
    if (name == "raise_exception") {
        const Value* message = argument(args, 0, "message");
        fail("the template raised an error: "
            + (message != nullptr ? toString(*message) : std::string()));
    }
    if (name == "namespace") {
        Value ns { Value::Kind::Namespace, {}, std::make_shared<Json>(Json::object()), {} };
        if (!args.positional.empty()) {
            const Json& init = dataOf(args.positional[0], "namespace");
            if (!init.is_object()) {
                fail("namespace() takes a dict or keyword arguments");
            }
            *ns.ns = init;
        }
        for (const auto& [key, value] : args.keyword) {
            (*ns.ns)[key] = dataOf(value, "namespace");
        }
        return ns;
    }
    if (name == "range") {
        std::vector<std::int64_t> p;
        for (const auto& a : args.positional) {
            const Json& j = dataOf(a, "range");
            if (!j.is_number_integer()) {
                fail("range() needs integers");
            }
            p.push_back(j.get<std::int64_t>());
        }
        if (p.empty() || p.size() > 3 || (p.size() == 3 && p[2] == 0)) {
            fail("range() takes 1 to 3 integers, the step not 0");
        }
        const std::int64_t start = p.size() == 1 ? 0 : p[0];
        const std::int64_t stop = p.size() == 1 ? p[0] : p[1];
        const std::int64_t step = p.size() == 3 ? p[2] : 1;
        if ((stop - start) / step > 100000) {
            fail("range() of more than 100000 items");
        }
        Json out = Json::array();
        for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            out.push_back(i);
        }
        return Value::of(out);
    }
    if (name == "strftime_now") {
        const Value* format = argument(args, 0, "format");
        const std::string f = format != nullptr ? stringOf(*format, "strftime_now") : std::string();
        const std::time_t now = std::time(nullptr);
        std::tm local {};
        localtime_r(&now, &local);
        char buf[256];
        const std::size_t n = std::strftime(buf, sizeof buf, f.c_str(), &local);
        return Value::of(std::string(buf, n));
    }
    fail(fmt::format(
        "the function '{}' is not implemented by day0's chat-template interpreter", name));
}

bool hasMethod(const Json& receiver, const std::string& name)
{
    static const std::vector<std::string> kString = { "strip", "lstrip", "rstrip", "startswith",
        "endswith", "split", "upper", "lower", "replace", "title", "capitalize", "find", "join" };
    static const std::vector<std::string> kDict = { "items", "keys", "values", "get" };
    if (receiver.is_string()) {
        return std::find(kString.begin(), kString.end(), name) != kString.end();
    }
    if (receiver.is_object()) {
        return std::find(kDict.begin(), kDict.end(), name) != kDict.end();
    }
    return false;
}

Value callMethod(const Json& receiver, const std::string& name, const Args& args)
{
    if (receiver.is_object()) {
        if (name == "items") {
            return Value::of(itemsOf(receiver));
        }
        Json out = Json::array();
        if (name == "keys" || name == "values") {
            for (const auto& [k, v] : receiver.items()) {
                out.push_back(name == "keys" ? Json(k) : v);
            }
            return Value::of(out);
        }
        const Value* key = argument(args, 0, "key");
        const Value* fallback = argument(args, 1, "default");
        const std::string k = key != nullptr ? stringOf(*key, "get") : std::string();
        if (receiver.contains(k)) {
            return Value::of(receiver[k]);
        }
        return fallback != nullptr ? *fallback : Value::of(nullptr);
    }
    const std::string s = receiver.get<std::string>();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        return Value::of(strip(s, argument(args, 0, "chars"), name != "rstrip", name != "lstrip"));
    }
    if (name == "startswith" || name == "endswith") {
        const Value* arg = argument(args, 0, "prefix");
        if (arg == nullptr) {
            fail(name + "() needs an argument");
        }
        std::vector<std::string> options;
        if (arg->isData() && arg->data.is_array()) {
            for (const auto& o : arg->data) {
                options.push_back(o.get<std::string>());
            }
        } else {
            options.push_back(stringOf(*arg, name));
        }
        for (const auto& o : options) {
            if (name == "startswith" ? s.starts_with(o) : s.ends_with(o)) {
                return Value::of(true);
            }
        }
        return Value::of(false);
    }
    if (name == "split") {
        const Value* max = argument(args, 1, "maxsplit");
        return Value::of(split(s, argument(args, 0, "sep"),
            max != nullptr ? dataOf(*max, "split").get<std::int64_t>() : -1));
    }
    if (name == "upper" || name == "lower") {
        return Value::of(name == "upper" ? upper(s) : lower(s));
    }
    if (name == "capitalize") {
        return Value::of(s.empty() ? s : upper(s.substr(0, 1)) + lower(s.substr(1)));
    }
    if (name == "title") {
        std::string out = s;
        bool start = true;
        for (char& c : out) {
            const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
            c = alpha ? char(start ? std::toupper(static_cast<unsigned char>(c))
                                   : std::tolower(static_cast<unsigned char>(c)))
                      : c;
            start = !alpha;
        }
        return Value::of(out);
    }
    if (name == "replace") {
        if (args.positional.size() < 2) {
            fail("replace() needs two strings");
        }
        const Value* count = argument(args, 2, "count");
        return Value::of(replaceAll(s, stringOf(args.positional[0], "replace"),
            stringOf(args.positional[1], "replace"),
            count != nullptr ? dataOf(*count, "replace").get<std::int64_t>() : -1));
    }
    if (name == "find") {
        const Value* sub = argument(args, 0, "sub");
        if (sub == nullptr) {
            fail("find() needs a string");
        }
        const std::size_t at = s.find(stringOf(*sub, "find"));
        return Value::of(at == std::string::npos
                ? std::int64_t(-1)
                : std::int64_t(characters(s.substr(0, at)).size()));
    }
    // join
    const Value* items = argument(args, 0, "iterable");
    if (items == nullptr) {
        fail("join() needs an iterable");
    }
    std::string out;
    bool first = true;
    for (const auto& item : iterate(*items)) {
        if (!item.is_string()) {
            fail("join() needs strings");
        }
        out += (first ? "" : s) + item.get<std::string>();
        first = false;
    }
    return Value::of(out);
}

} // namespace day0::serve::jinja
