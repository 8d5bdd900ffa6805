// How a streamed plan run's --memory-budget reaches each rank (parallel/rank_stream.h): the
// budget is per node, so in-process ranks divide it among themselves and each MPI process takes
// budget / (processes on its node) as MPI's shared-memory split counts them, else as the launcher
// does; --memory-budget-per-rank keeps a rank's own budget whole.
#include "parallel/rank_stream.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

namespace day0 {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t(1) << 20;

/// A launcher environment for the test: the given variables, every other one unset.
parallel::EnvLookup envOf(std::map<std::string, std::string> vars)
{
    return [vars = std::move(vars)](const char* name) -> const char* {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    };
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

TEST(BudgetShare, EachMpiProcessTakesItsNodesBudgetOverItsProcessesOnTheNode)
{
    // Two nodes of four processes: each takes a quarter of its node's budget, not an eighth.
    auto open = parallel::processShareOfBudget(
        512 * kMiB, 8, false, std::nullopt, envOf({ { "OMPI_COMM_WORLD_LOCAL_SIZE", "4" } }));
    ASSERT_TRUE(open.ok()) << open.error().message;
    EXPECT_EQ(open->perRank, 128 * kMiB);
    EXPECT_EQ(open->sharers, 4);
    EXPECT_TRUE(contains(open->basis, "512 MiB per node / 4 processes on this node"))
        << open->basis;
    EXPECT_TRUE(contains(open->basis, "OMPI_COMM_WORLD_LOCAL_SIZE")) << open->basis;

    // MPICH / Hydra's count; Open MPI's wins where both are set.
    auto mpich = parallel::processShareOfBudget(
        512 * kMiB, 8, false, std::nullopt, envOf({ { "MPI_LOCALNRANKS", "2" } }));
    ASSERT_TRUE(mpich.ok());
    EXPECT_EQ(mpich->perRank, 256 * kMiB);
    EXPECT_TRUE(contains(mpich->basis, "MPI_LOCALNRANKS")) << mpich->basis;
    auto both = parallel::processShareOfBudget(512 * kMiB, 8, false, std::nullopt,
        envOf({ { "OMPI_COMM_WORLD_LOCAL_SIZE", "8" }, { "MPI_LOCALNRANKS", "2" } }));
    ASSERT_TRUE(both.ok());
    EXPECT_EQ(both->perRank, 64 * kMiB);
}

TEST(BudgetShare, TheCommunicatorsCountOfTheNodesProcessesComesFirst)
{
    // MPI_COMM_TYPE_SHARED's count wins over a launcher variable that says otherwise.
    auto share = parallel::processShareOfBudget(
        512 * kMiB, 8, false, 2, envOf({ { "OMPI_COMM_WORLD_LOCAL_SIZE", "8" } }));
    ASSERT_TRUE(share.ok()) << share.error().message;
    EXPECT_EQ(share->perRank, 256 * kMiB);
    EXPECT_EQ(share->sharers, 2);
    EXPECT_TRUE(contains(share->basis,
        "512 MiB per node / 2 processes on this node "
        "(MPI_COMM_TYPE_SHARED)"))
        << share->basis;
    // Per rank, the count does not matter.
    EXPECT_EQ(
        parallel::processShareOfBudget(512 * kMiB, 8, true, 2, envOf({}))->perRank, 512 * kMiB);
    // A count outside 1 to the world's size is an error, not a share.
    for (const int bad : { 0, 9 }) {
        auto refused = parallel::processShareOfBudget(512 * kMiB, 8, false, bad, envOf({}));
        ASSERT_FALSE(refused.ok()) << bad;
        EXPECT_TRUE(contains(refused.error().message, "outside 1 to the world's 8"))
            << refused.error().message;
    }
}

TEST(BudgetShare, WithoutALauncherCountAllProcessesShareOneNodeAndItSaysSo)
{
    auto share = parallel::processShareOfBudget(512 * kMiB, 8, false, std::nullopt, envOf({}));
    ASSERT_TRUE(share.ok());
    EXPECT_EQ(share->perRank, 64 * kMiB); // never more than the node's budget in all
    EXPECT_EQ(share->sharers, 8);
    EXPECT_TRUE(contains(share->basis, "no launcher variable")) << share->basis;
}

TEST(BudgetShare, PerRankBudgetIsEachRanksOwn)
{
    auto mpi = parallel::processShareOfBudget(
        512 * kMiB, 8, true, std::nullopt, envOf({ { "OMPI_COMM_WORLD_LOCAL_SIZE", "4" } }));
    ASSERT_TRUE(mpi.ok());
    EXPECT_EQ(mpi->perRank, 512 * kMiB);
    EXPECT_EQ(mpi->sharers, 1);
    EXPECT_TRUE(contains(mpi->basis, "--memory-budget-per-rank")) << mpi->basis;
    const auto threads = parallel::inProcessShareOfBudget(512 * kMiB, 4, true);
    EXPECT_EQ(threads.perRank, 512 * kMiB);
    const auto shared = parallel::inProcessShareOfBudget(512 * kMiB, 4, false);
    EXPECT_EQ(shared.perRank, 128 * kMiB);
    EXPECT_TRUE(contains(shared.basis, "512 MiB / 4 in-process ranks")) << shared.basis;
    EXPECT_EQ(parallel::inProcessShareOfBudget(0, 4, false).perRank, 0U);
    EXPECT_EQ(parallel::processShareOfBudget(0, 4, false, std::nullopt, envOf({}))->perRank, 0U);
}

TEST(BudgetShare, ACountThatIsNotOneIsRefusedNamingTheVariable)
{
    for (const char* bad : { "0", "-2", "four", "4x", "", "9" }) {
        auto share = parallel::processShareOfBudget(
            512 * kMiB, 8, false, std::nullopt, envOf({ { "MPI_LOCALNRANKS", bad } }));
        ASSERT_FALSE(share.ok()) << bad;
        EXPECT_TRUE(contains(share.error().message, "MPI_LOCALNRANKS")) << share.error().message;
        EXPECT_TRUE(contains(share.error().message, "1 to the world's 8")) << share.error().message;
    }
}

TEST(BudgetShare, ReadsTheProcessEnvironmentByDefault)
{
    ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    auto share = parallel::processShareOfBudget(512 * kMiB, 4, false, std::nullopt);
    ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    ASSERT_TRUE(share.ok());
    EXPECT_EQ(share->perRank, 256 * kMiB);
}

} // namespace
} // namespace day0
