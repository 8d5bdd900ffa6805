#pragma once
// The taps of a forward step whose only product is its logits: a served sequence's steps
// (sequence_decoder.cpp) and a batched decode step (batch_decode.cpp) capture and inject nothing.

#include "exec/forward.h"

namespace day0::exec::detail {

/// Captures nothing and injects nothing.
template <typename T> class NullTaps final : public Taps<T> {
public:
    [[nodiscard]] bool wants(const std::string& /*name*/) const override { return false; }
    void record(const std::string& /*name*/, const T* /*data*/, const numerics::Shape& /*shape*/,
        std::string_view /*op*/) override
    {
    }
    void recordIds(const std::string& /*name*/, std::span<const std::int64_t> /*ids*/,
        const numerics::Shape& /*shape*/) override
    {
    }
    bool inject(const std::string& /*anchor*/, T* /*x*/, std::int64_t /*rows*/,
        std::int64_t /*width*/) override
    {
        return false;
    }
};

} // namespace day0::exec::detail
