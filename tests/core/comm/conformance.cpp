#include "conformance.h"

#include <fmt/format.h>
#include <numeric>
#include <vector>

namespace day0::comm::test {

namespace {

#define CONFORM(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            return Error::checkFailed(                                                             \
                fmt::format("rank {}: {}", c.rank(), fmt::format(__VA_ARGS__)));                   \
        }                                                                                          \
    } while (false)

Result<void> allReduceInPlace(Communicator& c)
{
    const int n = c.size();
    std::vector<float> v(1000);
    std::iota(v.begin(), v.end(), float(c.rank()));
    DAY0_TRY(c.allReduce(v.data(), v.data(), v.size(), DType::F32, ReduceOp::Sum));
    for (std::size_t i = 0; i < v.size(); ++i) {
        // sum over r of (i + r) = n*i + n(n-1)/2
        const float want = float(n * int(i) + n * (n - 1) / 2);
        CONFORM(v[i] == want, "all_reduce[{}] = {}, want {}", i, v[i], want);
    }
    double mx = c.rank();
    DAY0_TRY(c.allReduce(&mx, &mx, 1, DType::F64, ReduceOp::Max));
    CONFORM(mx == n - 1, "all_reduce max = {}", mx);
    return success();
}

Result<void> gatherAndScatter(Communicator& c)
{
    const int n = c.size();
    std::vector<double> gathered(std::size_t(n) * 2);
    const double mine[2] = { double(c.rank()), double(c.rank() + 10) };
    DAY0_TRY(c.allGather(mine, gathered.data(), 2, DType::F64));
    for (int r = 0; r < n; ++r) {
        CONFORM(gathered[std::size_t(2 * r)] == r && gathered[std::size_t(2 * r + 1)] == r + 10,
            "all_gather block {} = ({}, {})", r, gathered[std::size_t(2 * r)],
            gathered[std::size_t(2 * r + 1)]);
    }
    // Each rank contributes i*(rank+1); the sum over ranks is i*n(n+1)/2; rank r keeps slice r.
    std::vector<std::int64_t> full(std::size_t(n) * 2);
    for (std::size_t i = 0; i < full.size(); ++i) {
        full[i] = std::int64_t(i) * (c.rank() + 1);
    }
    std::int64_t slice[2] = {};
    DAY0_TRY(c.reduceScatter(full.data(), slice, 2, DType::I64, ReduceOp::Sum));
    const std::int64_t factor = std::int64_t(n) * (n + 1) / 2;
    CONFORM(slice[0] == std::int64_t(2 * c.rank()) * factor
            && slice[1] == std::int64_t(2 * c.rank() + 1) * factor,
        "reduce_scatter slice = ({}, {})", slice[0], slice[1]);
    return success();
}

Result<void> allToAllFixedAndVariable(Communicator& c)
{
    const auto n = std::size_t(c.size());
    const auto r = std::size_t(c.rank());
    std::vector<std::int32_t> send(n), recv(n);
    for (std::size_t j = 0; j < n; ++j) {
        send[j] = std::int32_t(100 * r + j);
    }
    DAY0_TRY(c.allToAll(send.data(), recv.data(), 1, DType::I32));
    for (std::size_t i = 0; i < n; ++i) {
        CONFORM(recv[i] == std::int32_t(100 * i + r), "all_to_all block {} = {}", i, recv[i]);
    }
    // Rank r sends (r + j + 1) elements equal to 10r + j to rank j.
    std::vector<std::size_t> sendCounts(n), sendDispls(n), recvCounts(n), recvDispls(n);
    std::vector<float> sendv;
    for (std::size_t j = 0; j < n; ++j) {
        sendCounts[j] = r + j + 1;
        sendDispls[j] = sendv.size();
        sendv.insert(sendv.end(), sendCounts[j], float(10 * r + j));
    }
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        recvCounts[i] = i + r + 1;
        recvDispls[i] = total;
        total += recvCounts[i];
    }
    std::vector<float> recvv(total);
    DAY0_TRY(c.allToAllV(
        sendv.data(), sendCounts, sendDispls, recvv.data(), recvCounts, recvDispls, DType::F32));
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < recvCounts[i]; ++k) {
            CONFORM(recvv[recvDispls[i] + k] == float(10 * i + r), "all_to_all_v from rank {} = {}",
                i, recvv[recvDispls[i] + k]);
        }
    }
    return success();
}

Result<void> broadcastAndPointToPoint(Communicator& c)
{
    const int root = c.size() - 1;
    float value = c.rank() == root ? 42.0f : -1.0f;
    DAY0_TRY(c.broadcast(&value, 1, DType::F32, root));
    CONFORM(value == 42.0f, "broadcast = {}", value);
    // Pairs (0,1), (2,3), ...: the even rank sends first, the odd one receives first, then the
    // other way round; point-to-point matching by order, as every implementation supports.
    const int peer = c.rank() ^ 1;
    if (peer < c.size()) {
        const float mine[3] = { float(c.rank()), 1, 2 };
        float theirs[3] = {};
        if (c.rank() % 2 == 0) {
            DAY0_TRY(c.send(mine, 3, DType::F32, peer));
            DAY0_TRY(c.recv(theirs, 3, DType::F32, peer));
        } else {
            DAY0_TRY(c.recv(theirs, 3, DType::F32, peer));
            DAY0_TRY(c.send(mine, 3, DType::F32, peer));
        }
        CONFORM(
            theirs[0] == float(peer) && theirs[2] == 2.0f, "recv from {} = {}", peer, theirs[0]);
    }
    return c.barrier();
}

Result<void> splitGroups(Communicator& c)
{
    // Pairs of neighbours form groups; rank 0 also tests opting out with a negative color.
    auto pair = c.split(c.rank() / 2, c.rank(), "pair");
    DAY0_TRY(pair);
    const int expectedSize = std::min(2, c.size() - (c.rank() / 2) * 2);
    CONFORM((*pair)->size() == expectedSize, "pair group size {}", (*pair)->size());
    CONFORM((*pair)->rank() == c.rank() % 2, "pair group rank {}", (*pair)->rank());
    std::int64_t v = c.rank();
    DAY0_TRY((*pair)->allReduce(&v, &v, 1, DType::I64, ReduceOp::Sum));
    const std::int64_t first = (c.rank() / 2) * 2;
    const std::int64_t want = expectedSize == 2 ? 2 * first + 1 : first;
    CONFORM(v == want, "pair all_reduce = {}, want {}", v, want);
    auto some = c.split(c.rank() == 0 ? -1 : 0, 0, "rest");
    DAY0_TRY(some);
    CONFORM((*some == nullptr) == (c.rank() == 0), "opt-out split returned {}",
        *some ? "a group" : "none");
    return success();
}

#undef CONFORM

} // namespace

Result<void> runConformance(Communicator& c)
{
    if (c.size() < 2) {
        return Error::badInput("the communicator conformance suite needs at least 2 ranks");
    }
    DAY0_TRY(allReduceInPlace(c));
    DAY0_TRY(gatherAndScatter(c));
    DAY0_TRY(allToAllFixedAndVariable(c));
    DAY0_TRY(broadcastAndPointToPoint(c));
    DAY0_TRY(splitGroups(c));
    return success();
}

} // namespace day0::comm::test
