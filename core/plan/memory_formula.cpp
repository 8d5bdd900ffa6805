#include "plan/memory_formula.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace day0::plan {

namespace {

// A value as a reader checks it: whole numbers with separators, fractions to 6 digits.
std::string number(double v)
{
    if (v == std::floor(v) && std::abs(v) < 9e15) {
        return formatExact(std::int64_t(v));
    }
    return fmt::format("{:.6g}", v);
}

} // namespace

double FormulaTerm::value() const
{
    double v = 1.0;
    for (const auto& i : inputs) {
        v = i.divides ? v / i.value : v * i.value;
    }
    return v;
}

std::string FormulaTerm::arithmetic() const
{
    std::string out;
    for (const auto& i : inputs) {
        if (!out.empty() || i.divides) {
            out += i.divides ? " ÷ " : " × ";
        }
        out += number(i.value);
    }
    return out.empty() ? "1" : out;
}

double Derivation::evaluate() const
{
    double sum = 0.0;
    for (const auto& t : terms) {
        sum += t.value();
    }
    return sum;
}

std::string Derivation::arithmetic() const
{
    std::string out;
    for (const auto& t : terms) {
        out += (out.empty() ? "" : " + ") + t.arithmetic();
    }
    return out.empty() ? "0" : out;
}

std::vector<std::string> Derivation::inputLines() const
{
    std::vector<std::string> out;
    std::vector<std::string> seen;
    for (const auto& t : terms) {
        for (const auto& i : t.inputs) {
            std::string line = fmt::format("{} = {}{}{} ({})", i.name, number(i.value),
                i.unit.empty() ? "" : " ", i.unit, i.source);
            if (std::find(seen.begin(), seen.end(), line) == seen.end()) {
                seen.push_back(line);
                out.push_back(std::move(line));
            }
        }
    }
    return out;
}

std::string Derivation::text() const
{
    std::string out = fmt::format(
        "{} = {} ({})\n  {}\n", figure, formatExact(bytes.value), formatBytes(bytes), formula);
    for (const auto& t : terms) {
        out += fmt::format("  + {}: ", t.what);
        std::string names;
        for (const auto& i : t.inputs) {
            if (!names.empty() || i.divides) {
                names += i.divides ? " ÷ " : " × ";
            }
            names += i.name;
        }
        out += fmt::format("{} = {} = {}\n", names.empty() ? "1" : names, t.arithmetic(),
            number(std::round(t.value())));
    }
    out += "  inputs:\n";
    for (const auto& line : inputLines()) {
        out += "    " + line + "\n";
    }
    return out;
}

const Derivation* findDerivation(
    const std::vector<Derivation>& derivations, std::string_view figure)
{
    const auto it = std::find_if(derivations.begin(), derivations.end(),
        [&](const Derivation& d) { return d.figure == figure; });
    return it == derivations.end() ? nullptr : &*it;
}

} // namespace day0::plan
