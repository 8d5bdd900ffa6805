#pragma once
// What the serving panel's tests share (serving_panel_test.cpp, serving_timeline_test.cpp).

#include "actions/staged_bench.h"

namespace day0::ui::test {

/// A short load level: `requests` requests of 8 prompt and 4 output tokens, at most
/// `concurrency` at once.
inline actions::BenchStage stage(int concurrency, int requests)
{
    actions::BenchStage s;
    s.concurrency = concurrency;
    s.inputTokens = 8;
    s.outputTokens = 4;
    s.numPrompts = requests;
    return s;
}

} // namespace day0::ui::test
