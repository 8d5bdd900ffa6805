#pragma once

#include "numerics/dump_compare.h"
#include "numerics/tolerance.h"

#include <nlohmann/json.hpp>

namespace day0::numerics::test {

/// A one-rule tolerance table for comparison tests: every bf16 capture within relative L2
/// 1.6e-2, the floor ratio effectively unlimited.
inline ToleranceTable bf16AnyTable()
{
    return *parseToleranceTable(nlohmann::json::parse(R"({
        "name": "t", "version": 1, "rules": [
            { "id": "bf16.any", "dtype": "bf16", "op": "*", "max_rel_l2": 1.6e-2, "max_floor_ratio": 1000 } ] })"),
        "t.json");
}

/// compareDumps(reference, target) judged by bf16AnyTable(), with an inject-mode dump when given.
inline Result<DumpComparison> compareWithBf16Table(
    const Dump& reference, const Dump& target, const Dump* local = nullptr)
{
    const ToleranceTable table = bf16AnyTable();
    CompareOptions options;
    options.table = &table;
    options.local = local;
    Progress progress;
    return compareDumps(reference, target, options, progress, {});
}

} // namespace day0::numerics::test
