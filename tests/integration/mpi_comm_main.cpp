// Runs under mpirun: the communicator conformance suite over the MPI plugin.
//   mpi_comm_integration            the suite on MPI_COMM_WORLD (direct library)
//   mpi_comm_integration --plugin   the same, with the communicator loaded as a plugin
//   mpi_comm_integration --hang     rank 1 hangs before a barrier: the others stop within the
//   timeout mpi_comm_integration --fail     rank 1 fails before a barrier: it aborts the job with
//   its reason
#include "comm/communicator.h"
#include "conformance.h"
#include "extend/plugin_registry.h"
#include "mpi_communicator.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using namespace day0;

/// The observer installed on the world sees each call of the world and of a group split from
/// it, once, with this rank, the call's kind, bytes and group, and nothing after it is removed.
Result<void> checkObserver(comm::Communicator& world)
{
    std::vector<comm::CollectiveRecord> records;
    world.setObserver([&](const comm::CollectiveRecord& r) { records.push_back(r); });
    std::vector<float> v(256, 1.0f);
    DAY0_TRY(world.allReduce(v.data(), v.data(), v.size(), DType::F32, comm::ReduceOp::Sum));
    DAY0_TRY(world.barrier());
    auto group = world.split(world.rank() % 2, world.rank(), "obs");
    if (!group) {
        return group.error();
    }
    DAY0_TRY((*group)->barrier());
    world.setObserver({});
    DAY0_TRY(world.barrier());
    const std::vector<std::pair<comm::CollectiveKind, std::string>> expected {
        { comm::CollectiveKind::AllReduce, world.name() },
        { comm::CollectiveKind::Barrier, world.name() },
        { comm::CollectiveKind::Barrier, (*group)->name() }
    };
    if (records.size() != expected.size()) {
        return Error::checkFailed(fmt::format(
            "rank {}: the observer saw {} calls, expected 3", world.rank(), records.size()));
    }
    for (std::size_t i = 0; i < records.size(); ++i) {
        const auto& r = records[i];
        if (r.kind != expected[i].first || r.group != expected[i].second
            || r.worldRank != world.rank() || r.endNs < r.startNs
            || r.bytes != (i == 0 ? 1024 : 0)) {
            return Error::checkFailed(fmt::format(
                "rank {}: record {} is {} of {} bytes on '{}' (world rank {}), expected {} on '{}'",
                world.rank(), i, comm::collectiveName(r.kind), r.bytes, r.group, r.worldRank,
                comm::collectiveName(expected[i].first), expected[i].second));
        }
    }
    return success();
}

} // namespace

int main(int argc, char** argv)
{
    const bool viaPlugin = argc > 1 && std::strcmp(argv[1], "--plugin") == 0;
    const bool hang = argc > 1 && std::strcmp(argv[1], "--hang") == 0;
    const bool fail = argc > 1 && std::strcmp(argv[1], "--fail") == 0;

    Result<std::shared_ptr<comm::Communicator>> world = std::shared_ptr<comm::Communicator>();
    if (viaPlugin) {
        extend::PluginRegistry registry;
        world = extend::createCommunicator(
            registry, "mpi", R"({"timeout_s": 60, "check_calls": true})");
    } else {
        mpi::MpiOptions options;
        options.timeout = Seconds(hang ? 1.0 : 60.0);
        world = mpi::createMpiWorld(options);
    }
    if (!world) {
        fmt::print(stderr, "day0: error: {}\n", world.error().message);
        return 2;
    }
    auto& c = **world;
    if (hang || fail) {
        if (c.rank() == 1 && hang) {
            std::this_thread::sleep_for(std::chrono::seconds(120)); // hangs; the others give up
        }
        if (c.rank() == 1 && fail) {
            c.abort("cannot open its shard rank-00001.safetensors");
        }
        auto outcome = c.barrier();
        if (!outcome) {
            c.abort(outcome.error().message);
        }
        return 1;
    }
    auto outcome = comm::test::runConformance(c);
    if (outcome) {
        outcome = checkObserver(c);
    }
    if (!outcome) {
        fmt::print(stderr, "FAILED: {}\n", outcome.error().message);
        c.abort(outcome.error().message);
        return 1;
    }
    if (c.rank() == 0) {
        fmt::print(
            "conformance passed on {} MPI ranks{}\n", c.size(), viaPlugin ? " (plugin)" : "");
    }
    return 0;
}
