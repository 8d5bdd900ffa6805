#pragma once
// The taps of an engine run (engine.cpp): CaptureTaps collects a run's captures over its steps
// (and injects a reference's outputs), StreamingTaps tells a layer stream where each layer ends
// and which experts the router chose. Included by engine.cpp and streamed_sequence.cpp only.

#include "exec/engine.h"
#include "exec/forward.h"
#include "exec/layer_stream.h"
#include "exec/precision.h"
#include "numerics/state_anchor.h"
#include "numerics/tolerance.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace day0::exec::detail {

using numerics::Shape;
using numerics::Tensor;

/// A projection or q/k/kv norm: captured only with CaptureOptions::projections.
inline bool isDetailCapture(const std::string& name)
{
    const auto kind = numerics::opKindForAnchor(name);
    if (kind == numerics::OpKind::Linear) {
        return true;
    }
    for (const char* leaf : { ".q_norm", ".k_norm", ".q_a_layernorm", ".kv_a_layernorm" }) {
        const std::string_view s(leaf);
        if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
            return true;
        }
    }
    return false;
}

/// Collects the captures of every step and concatenates them along the token dimension.
template <typename T> class CaptureTaps final : public Taps<T> {
public:
    CaptureTaps(
        const CaptureOptions& options, const numerics::Dump* inject, const PrecisionPlan& plan)
        : m_options(options)
        , m_inject(inject)
        , m_plan(plan)
    {
    }

    /// A layer slice: injects only after `entry`, reading the dump's capture `source`.
    void injectOnlyAt(std::string entry, std::string source)
    {
        m_entry = std::move(entry);
        m_entrySource = std::move(source);
    }

    void beginStep(std::int64_t firstRow) { m_row = firstRow; }

    [[nodiscard]] bool wants(const std::string& name) const override
    {
        if (name == "lm_head") {
            return true;
        }
        if (name.ends_with("#in0") && !m_options.inputs) {
            return false;
        }
        if (numerics::isStateCapture(name) && !m_options.state) {
            return false;
        }
        if (!m_options.projections && isDetailCapture(name)) {
            return false;
        }
        if (m_options.filters.empty()) {
            return true;
        }
        return std::any_of(m_options.filters.begin(), m_options.filters.end(),
            [&](const std::string& f) { return name.rfind(f, 0) == 0; });
    }

    void record(
        const std::string& name, const T* data, const Shape& shape, std::string_view op) override
    {
        if (!wants(name)) {
            return;
        }
        const DType dtype = std::is_same_v<T, double> ? DType::F64 : DType::F32;
        Tensor t = Tensor::zeros(shape, dtype);
        std::copy_n(data, t.numel(), t.template data<T>());
        append(name, std::move(t), std::string(op));
    }

    void recordIds(
        const std::string& name, std::span<const std::int64_t> ids, const Shape& shape) override
    {
        if (!wants(name)) {
            return;
        }
        append(name, Tensor::fromInts(shape, ids), "router_selection");
    }

    bool inject(const std::string& anchor, T* x, std::int64_t rows, std::int64_t width) override
    {
        if (m_inject == nullptr || (!m_entry.empty() && anchor != m_entry)) {
            return false;
        }
        const Tensor* src = m_inject->tensor(m_entry.empty() ? anchor : m_entrySource);
        // run() checked presence and shapes before the first step.
        const Tensor block = src->narrow(0, m_row, rows)
                                 .contiguous()
                                 .to(std::is_same_v<T, double> ? DType::F64 : DType::F32);
        std::copy_n(block.template data<T>(), rows * width, x);
        return true;
    }

    numerics::Dump finish(bool statsOnly)
    {
        numerics::Dump dump;
        for (const auto& name : m_order) {
            auto& steps = m_steps[name];
            Shape shape = steps.front().shape();
            std::int64_t rows = 0;
            for (const auto& s : steps) {
                rows += s.dim(0);
            }
            shape[0] = rows;
            Tensor all = Tensor::zeros(shape, steps.front().dtype());
            std::int64_t offset = 0;
            for (const auto& s : steps) {
                std::memcpy(all.rawData() + offset, s.rawData(), std::size_t(s.byteSize()));
                offset += s.byteSize();
            }
            const auto kind = numerics::opKindForAnchor(name);
            PrecisionMode mode = m_plan.modeFor(kind, numerics::layerOfAnchor(name));
            if (m_plan.stateMode && name.ends_with(numerics::kStateSuffix)) {
                mode = *m_plan.stateMode; // the dtype the state is stored in
            }
            dump.add(name, all, !statsOnly || name == "lm_head", m_ops[name],
                mode != m_plan.base ? std::string(precisionName(mode)) : std::string());
            steps.clear();
        }
        return dump;
    }

private:
    void append(const std::string& name, Tensor t, std::string op)
    {
        auto& steps = m_steps[name];
        if (steps.empty()) {
            m_order.push_back(name);
            m_ops[name] = std::move(op);
        }
        steps.push_back(std::move(t));
    }

    const CaptureOptions& m_options;
    const numerics::Dump* m_inject;
    const PrecisionPlan& m_plan;
    std::string m_entry; ///< a slice's entry anchor; empty: inject at every anchor
    std::string m_entrySource;
    std::int64_t m_row = 0;
    std::vector<std::string> m_order;
    std::map<std::string, std::vector<Tensor>> m_steps;
    std::map<std::string, std::string> m_ops;
};

/// Captures through `inner` and tells the layer stream at every layer boundary, which the forward
/// marks by asking to inject the finished module's output (before the next one reads a weight).
template <typename T> class StreamingTaps final : public Taps<T> {
public:
    StreamingTaps(Taps<T>& inner, LayerStream& stream)
        : m_inner(inner)
        , m_stream(stream)
    {
    }

    [[nodiscard]] bool wants(const std::string& name) const override { return m_inner.wants(name); }
    void record(
        const std::string& name, const T* data, const Shape& shape, std::string_view op) override
    {
        m_inner.record(name, data, shape, op);
    }
    void recordIds(
        const std::string& name, std::span<const std::int64_t> ids, const Shape& shape) override
    {
        // A router's choices arrive before its experts run: only those are loaded.
        constexpr std::string_view kTopK = "#topk";
        if (name.ends_with(kTopK)) {
            m_stream.routed(name.substr(0, name.size() - kTopK.size()), ids);
        }
        m_inner.recordIds(name, ids, shape);
    }
    bool inject(const std::string& anchor, T* x, std::int64_t rows, std::int64_t width) override
    {
        m_stream.enter(anchor);
        return m_inner.inject(anchor, x, rows, width);
    }

private:
    Taps<T>& m_inner;
    LayerStream& m_stream;
};

} // namespace day0::exec::detail
