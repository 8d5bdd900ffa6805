#pragma once

#include "base/units.h"

#include <string>
#include <string_view>
#include <vector>

namespace day0::plan {

/// One factor of a memory term: a named input, its value and where the value came from.
struct FormulaInput {
    std::string name; ///< as the formula names it: "tp", "layers", "kv_heads"
    double value = 0;
    std::string unit; ///< "B/param", "tokens", "B", or empty for a count
    /// Where it came from: "config: num_key_value_heads", "plan: tp", "workload: context",
    /// "option: fragmentation", "checkpoint: ...", "derived: ..." (computed from others).
    std::string source;
    bool divides = false; ///< the term divides by it
};

/// One summand of a figure: the product of its inputs (divisors divide).
struct FormulaTerm {
    std::string what; ///< which part: "layers of class 0 (attention, dense MLP)", "embedding"
    std::vector<FormulaInput> inputs;

    /// The product of the inputs, divisors dividing.
    [[nodiscard]] double value() const;
    /// The arithmetic with the values: "80 × 856,686,592 × 2 ÷ 8".
    [[nodiscard]] std::string arithmetic() const;
};

/// How one figure of RankMemory was computed, recorded by the code that computes it: the
/// figure is the sum of its terms, each the product of its inputs. Pure data; thread-safe.
struct Derivation {
    std::string figure; ///< "weights", "kv_cache.attention", "fragmentation", "total", ...
    Bytes bytes; ///< the figure as RankMemory reports it
    std::string formula; ///< in words and symbols a Megatron user recognises
    std::vector<FormulaTerm> terms;

    /// Σ terms: what the stated inputs give (equals `bytes` up to rounding to whole bytes).
    [[nodiscard]] double evaluate() const;
    /// "t1 + t2 + …" with values.
    [[nodiscard]] std::string arithmetic() const;
    /// Every distinct input once: "tp = 8 (plan: tp)", in the order the terms name them.
    [[nodiscard]] std::vector<std::string> inputLines() const;
    /// Formula, arithmetic and inputs as lines of text (CLI --explain, tooltips).
    [[nodiscard]] std::string text() const;
};

/// The derivation of `figure` in `derivations`, or nullptr.
const Derivation* findDerivation(
    const std::vector<Derivation>& derivations, std::string_view figure);

} // namespace day0::plan
