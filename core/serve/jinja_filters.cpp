// The filters and tests of the chat-template interpreter (jinja.h); every other name is refused
// with TemplateError naming it.
#include "serve/jinja_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::serve::jinja {

namespace {

[[noreturn]] void fail(const std::string& what) { throw TemplateError(what); }

} // namespace

bool applyTest(const std::string& name, const Value& v, const Args& args)
{
    const Json* j = v.isData() ? &v.data : nullptr;
    if (name == "defined") {
        return !v.isUndefined();
    }
    if (name == "undefined") {
        return v.isUndefined();
    }
    if (name == "none") {
        return j != nullptr && j->is_null();
    }
    if (name == "string") {
        return j != nullptr && j->is_string();
    }
    if (name == "number") {
        return j != nullptr && j->is_number();
    }
    if (name == "integer") {
        return j != nullptr && j->is_number_integer();
    }
    if (name == "float") {
        return j != nullptr && j->is_number_float();
    }
    if (name == "boolean") {
        return j != nullptr && j->is_boolean();
    }
    if (name == "true" || name == "false") {
        return j != nullptr && j->is_boolean() && j->get<bool>() == (name == "true");
    }
    if (name == "mapping") {
        return (j != nullptr && j->is_object()) || v.kind == Value::Kind::Namespace;
    }
    if (name == "sequence") {
        return j != nullptr && (j->is_array() || j->is_string() || j->is_object());
    }
    if (name == "iterable") {
        return v.isUndefined()
            || (j != nullptr && (j->is_array() || j->is_string() || j->is_object()));
    }
    if (name == "callable") {
        return v.kind == Value::Kind::Function || v.kind == Value::Kind::Method;
    }
    if (name == "odd" || name == "even" || name == "divisibleby") {
        if (j == nullptr || !j->is_number_integer()) {
            fail(fmt::format("the test '{}' needs an integer", name));
        }
        const std::int64_t x = j->get<std::int64_t>();
        if (name == "divisibleby") {
            const Value* d = argument(args, 0, "num");
            if (d == nullptr || !d->isData() || !d->data.is_number_integer()
                || d->data.get<std::int64_t>() == 0) {
                fail("divisibleby needs a non-zero integer");
            }
            return x % d->data.get<std::int64_t>() == 0;
        }
        return (x % 2 != 0) == (name == "odd");
    }
    if (name == "eq" || name == "equalto" || name == "==" || name == "ne" || name == "!=") {
        const Value* other = argument(args, 0, "other");
        if (other == nullptr) {
            fail(fmt::format("the test '{}' needs a value to compare with", name));
        }
        const bool same = other->isData() && j != nullptr
            ? (j->is_number() && other->data.is_number()
                    ? j->get<double>() == other->data.get<double>()
                    : *j == other->data)
            : (v.isUndefined() && other->isUndefined());
        return (name == "ne" || name == "!=") ? !same : same;
    }
    if (name == "in") {
        const Value* c = argument(args, 0, "seq");
        if (c == nullptr) {
            fail("the test 'in' needs a container");
        }
        for (const auto& item : iterate(*c)) {
            if (j != nullptr && item == *j) {
                return true;
            }
        }
        return false;
    }
    fail(fmt::format("the test '{}' is not implemented by day0's chat-template interpreter", name));
}

Value applyFilter(const std::string& name, const Value& v, const Args& args)
{
    if (name == "default" || name == "d") {
        const Value* fallback = argument(args, 0, "default_value");
        const Value* boolean = argument(args, 1, "boolean");
        const bool useFalsy = boolean != nullptr && truthy(*boolean);
        if (v.isUndefined() || (useFalsy && !truthy(v))) {
            return fallback != nullptr ? *fallback : Value::of("");
        }
        return v;
    }
    if (name == "length" || name == "count") {
        if (v.isUndefined()) {
            return Value::of(0);
        }
        const Json& j = dataOf(v, name);
        if (j.is_string()) {
            return Value::of(std::int64_t(characters(j.get<std::string>()).size()));
        }
        if (j.is_array() || j.is_object()) {
            return Value::of(std::int64_t(j.size()));
        }
        fail(fmt::format("|{} of {}, which has no length", name, pythonRepr(j)));
    }
    if (name == "string") {
        return Value::of(toString(v));
    }
    if (name == "safe") {
        return v;
    }
    if (name == "tojson") {
        // HF's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
        if (!args.positional.empty()) {
            fail("tojson with positional arguments is not implemented (name them: indent=)");
        }
        int indent = -1;
        for (const auto& [key, value] : args.keyword) {
            if (key == "indent" && value.isData() && value.data.is_number_integer()) {
                indent = int(value.data.get<std::int64_t>());
            } else if (key == "indent" && value.isData() && value.data.is_null()) {
                indent = -1;
            } else if (key == "ensure_ascii" && !truthy(value)) {
                continue;
            } else {
                fail(fmt::format("tojson({}={}) is not implemented", key, toString(value)));
            }
        }
        return Value::of(toJson(dataOf(v, "tojson"), indent));
    }
    if (name == "items") {
        const Json& j = dataOf(v, "items");
        if (!j.is_object()) {
            fail("|items needs a dict");
        }
        return Value::of(itemsOf(j));
    }
    if (name == "list") {
        Json out = Json::array();
        for (auto& x : iterate(v)) {
            out.push_back(std::move(x));
        }
        return Value::of(out);
    }
    if (name == "first" || name == "last") {
        const auto items = iterate(v);
        if (items.empty()) {
            return Value::undefined(name + " of an empty sequence");
        }
        return Value::of(name == "first" ? items.front() : items.back());
    }
    if (name == "reverse") {
        const Json& j = dataOf(v, "reverse");
        if (j.is_string()) {
            auto chars = characters(j.get<std::string>());
            std::reverse(chars.begin(), chars.end());
            std::string s;
            for (const auto& c : chars) {
                s += c;
            }
            return Value::of(s);
        }
        auto items = iterate(v);
        std::reverse(items.begin(), items.end());
        return Value::of(Json(items));
    }
    if (name == "join") {
        const Value* sep = argument(args, 0, "d");
        if (argument(args, 1, "attribute") != nullptr) {
            fail("join(attribute=...) is not implemented");
        }
        std::string out;
        bool first = true;
        for (const auto& item : iterate(v)) {
            out += first ? "" : (sep != nullptr ? toString(*sep) : "");
            first = false;
            out += toString(Value::of(item));
        }
        return Value::of(out);
    }
    if (name == "int" || name == "float" || name == "abs") {
        const Json& j = dataOf(v, name);
        if (name == "abs") {
            if (!j.is_number()) {
                fail("|abs needs a number");
            }
            return j.is_number_integer() ? Value::of(std::llabs(j.get<std::int64_t>()))
                                         : Value::of(std::fabs(j.get<double>()));
        }
        double x = 0.0;
        if (j.is_number()) {
            x = j.get<double>();
        } else if (j.is_string()) {
            try {
                x = std::stod(j.get<std::string>());
            } catch (const std::exception&) {
                x = 0.0; // Jinja's int/float filters default to 0 on failure
            }
        }
        return name == "int" ? Value::of(std::int64_t(x)) : Value::of(x);
    }
    if (name == "selectattr" || name == "rejectattr") {
        const Value* attr = argument(args, 0, "attribute");
        if (attr == nullptr) {
            fail(fmt::format("|{} needs an attribute name", name));
        }
        const std::string key = stringOf(*attr, name);
        Args testArgs;
        for (std::size_t i = 2; i < args.positional.size(); ++i) {
            testArgs.positional.push_back(args.positional[i]);
        }
        Json out = Json::array();
        for (const auto& item : iterate(v)) {
            const Value field = item.is_object() && item.contains(key) ? Value::of(item[key])
                                                                       : Value::undefined(key);
            const bool pass = args.positional.size() > 1
                ? applyTest(stringOf(args.positional[1], name), field, testArgs)
                : truthy(field);
            if (pass == (name == "selectattr")) {
                out.push_back(item);
            }
        }
        return Value::of(out);
    }
    if (name == "map") {
        const Value* attr = nullptr;
        for (const auto& [key, value] : args.keyword) {
            if (key == "attribute") {
                attr = &value;
            }
        }
        Json out = Json::array();
        for (const auto& item : iterate(v)) {
            if (attr != nullptr) {
                const std::string key = stringOf(*attr, "map");
                out.push_back(item.is_object() && item.contains(key) ? item[key] : Json());
            } else if (!args.positional.empty()) {
                Args rest;
                rest.positional.assign(args.positional.begin() + 1, args.positional.end());
                out.push_back(
                    dataOf(applyFilter(stringOf(args.positional[0], "map"), Value::of(item), rest),
                        "map"));
            } else {
                fail("|map needs a filter name or attribute=");
            }
        }
        return Value::of(out);
    }
    if (name == "indent") {
        const Value* width = argument(args, 0, "width");
        const Value* first = argument(args, 1, "first");
        const Value* blank = argument(args, 2, "blank");
        const std::string pad = width == nullptr ? std::string(4, ' ')
            : width->isData() && width->data.is_string()
            ? width->data.get<std::string>()
            : std::string(std::size_t(dataOf(*width, "indent").get<std::int64_t>()), ' ');
        const Value newline = Value::of("\n");
        const Json lines = split(stringOf(v, "indent"), &newline, -1);
        std::string out;
        for (std::size_t i = 0; i < lines.size(); ++i) {
            const std::string line = lines[i].get<std::string>();
            const bool indentIt = (i > 0 || (first != nullptr && truthy(*first)))
                && (!line.empty() || (blank != nullptr && truthy(*blank)));
            out += (i ? "\n" : "") + (indentIt ? pad : "") + line;
        }
        return Value::of(out);
    }
    if (v.isData() && v.data.is_string()) {
        const std::string s = v.data.get<std::string>();
        if (name == "trim") {
            return Value::of(strip(s, argument(args, 0, "chars"), true, true));
        }
        if (name == "upper") {
            return Value::of(upper(s));
        }
        if (name == "lower") {
            return Value::of(lower(s));
        }
        if (name == "capitalize") {
            return Value::of(s.empty() ? s : upper(s.substr(0, 1)) + lower(s.substr(1)));
        }
        if (name == "replace") {
            const Value* count = argument(args, 2, "count");
            return Value::of(replaceAll(s, stringOf(*argument(args, 0, "old"), "replace"),
                stringOf(*argument(args, 1, "new"), "replace"),
                count != nullptr ? dataOf(*count, "replace").get<std::int64_t>() : -1));
        }
    }
    if (name == "trim" || name == "upper" || name == "lower" || name == "capitalize"
        || name == "replace") {
        fail(fmt::format(
            "|{} needs a string, got {}", name, v.isData() ? pythonRepr(v.data) : "undefined"));
    }
    fail(fmt::format(
        "the filter '{}' is not implemented by day0's chat-template interpreter", name));
}

} // namespace day0::serve::jinja
