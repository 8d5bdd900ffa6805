// Fuzzes the config.json parser (JSON as Python's json writes it: NaN and ±Infinity outside
// strings): whatever it accepts must write back and parse again to the same document.
#include "base/python_json.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

// Equal as documents, NaN equal to NaN (nlohmann's operator== says NaN != NaN).
// Integers compare by value: "-0" parses as a signed 0 and writes back as "0", which parses
// as an unsigned 0, as Python's json writes int(-0) as 0.
bool same(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b)
{
    const auto integral = [](const nlohmann::ordered_json& v) {
        return v.is_number_integer() || v.is_number_unsigned();
    };
    if (integral(a) && integral(b)) {
        return a == b;
    }
    if (a.type() != b.type()) {
        return false;
    }
    if (a.is_number_float()) {
        const double x = a.get<double>();
        const double y = b.get<double>();
        return (std::isnan(x) && std::isnan(y)) || x == y;
    }
    if (a.is_structured()) {
        if (a.size() != b.size()) {
            return false;
        }
        auto i = a.begin();
        auto j = b.begin();
        for (; i != a.end(); ++i, ++j) {
            if ((a.is_object() && i.key() != j.key()) || !same(*i, *j)) {
                return false;
            }
        }
        return true;
    }
    return a == b;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto parsed = day0::parsePythonJsonOrdered(text, "fuzz.json");
    if (!parsed) {
        return 0;
    }
    const std::string written = day0::dumpPythonJson(parsed->value, 2);
    auto again = day0::parsePythonJsonOrdered(written, "again.json");
    if (!again || !same(parsed->value, again->value)) {
        std::abort();
    }
    return 0;
}
