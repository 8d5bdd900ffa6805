// One head of a delta rule in reverse (delta_rule_backward.h), token by token from the last.
#include "exec/delta_rule_backward.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace day0::exec::detail {

template <typename T>
void deltaRuleBackward(
    const DeltaHeadTrace<T>& trace, const T* dout, const DeltaHeadGrads<T>& grads)
{
    const std::int64_t dk = trace.keyDim;
    const std::int64_t dv = trace.valueDim;
    const std::int64_t stateSize = dk * dv;
    std::vector<T> dS(static_cast<std::size_t>(stateSize), T(0));
    std::vector<T> hat(static_cast<std::size_t>(stateSize));
    std::vector<T> sNew(static_cast<std::size_t>(stateSize));
    std::vector<T> decay(static_cast<std::size_t>(dk));
    std::vector<T> u(static_cast<std::size_t>(dv));
    std::vector<T> delta(static_cast<std::size_t>(dv));
    std::vector<T> ddelta(static_cast<std::size_t>(dv));
    for (std::int64_t t = trace.tokens - 1; t >= 0; --t) {
        const T* q = trace.q + t * dk;
        const T* k = trace.k + t * dk;
        const T* v = trace.v + t * dv;
        const T* prev = trace.states + t * trace.stateStride;
        const T b = trace.beta[t];
        for (std::int64_t i = 0; i < dk; ++i) {
            decay[std::size_t(i)]
                = std::exp(trace.perChannel ? trace.decay[t * dk + i] : trace.decay[t]);
        }
        // The forward step again: Ŝ, u = Ŝᵀk, δ, S_t.
        std::fill(u.begin(), u.end(), T(0));
        for (std::int64_t i = 0; i < dk; ++i) {
            for (std::int64_t c = 0; c < dv; ++c) {
                const T x = decay[std::size_t(i)] * prev[i * dv + c];
                hat[std::size_t(i * dv + c)] = x;
                u[std::size_t(c)] += x * k[i];
            }
        }
        for (std::int64_t c = 0; c < dv; ++c) {
            delta[std::size_t(c)] = b * (v[c] - u[std::size_t(c)]);
        }
        for (std::int64_t i = 0; i < dk; ++i) {
            for (std::int64_t c = 0; c < dv; ++c) {
                sNew[std::size_t(i * dv + c)]
                    = hat[std::size_t(i * dv + c)] + k[i] * delta[std::size_t(c)];
            }
        }
        // o = S_tᵀq.
        const T* dO = dout + t * dv;
        T* dq = grads.q + t * dk;
        T* dkRow = grads.k + t * dk;
        for (std::int64_t i = 0; i < dk; ++i) {
            T acc = T(0);
            for (std::int64_t c = 0; c < dv; ++c) {
                dS[std::size_t(i * dv + c)] += q[i] * dO[c];
                acc += sNew[std::size_t(i * dv + c)] * dO[c];
            }
            dq[i] += acc;
        }
        // S_t = Ŝ + k δᵀ, δ = β(v − u).
        std::fill(ddelta.begin(), ddelta.end(), T(0));
        for (std::int64_t i = 0; i < dk; ++i) {
            T acc = T(0);
            for (std::int64_t c = 0; c < dv; ++c) {
                acc += dS[std::size_t(i * dv + c)] * delta[std::size_t(c)];
                ddelta[std::size_t(c)] += dS[std::size_t(i * dv + c)] * k[i];
            }
            dkRow[i] += acc;
        }
        T* dvRow = grads.v + t * dv;
        T dbSum = T(0);
        for (std::int64_t c = 0; c < dv; ++c) {
            dvRow[c] += b * ddelta[std::size_t(c)];
            dbSum += ddelta[std::size_t(c)] * (v[c] - u[std::size_t(c)]);
        }
        grads.beta[t] += dbSum;
        // u = Ŝᵀk: dŜ = dS + k duᵀ (du = −β dδ), dk += Ŝ du; then Ŝ = diag(e^g) S_{t−1}.
        for (std::int64_t i = 0; i < dk; ++i) {
            T acc = T(0);
            T dg = T(0);
            for (std::int64_t c = 0; c < dv; ++c) {
                const T du = -b * ddelta[std::size_t(c)];
                T& ds = dS[std::size_t(i * dv + c)];
                ds += k[i] * du;
                acc += hat[std::size_t(i * dv + c)] * du;
                dg += ds * hat[std::size_t(i * dv + c)];
                ds *= decay[std::size_t(i)];
            }
            dkRow[i] += acc;
            if (trace.perChannel) {
                grads.decay[t * dk + i] += dg;
            } else {
                grads.decay[t] += dg;
            }
        }
    }
}

template void deltaRuleBackward<float>(
    const DeltaHeadTrace<float>&, const float*, const DeltaHeadGrads<float>&);
template void deltaRuleBackward<double>(
    const DeltaHeadTrace<double>&, const double*, const DeltaHeadGrads<double>&);

} // namespace day0::exec::detail
