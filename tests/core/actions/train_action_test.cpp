// The train action (actions::trainModel, `day0 train`) as a whole: how it runs the trainer.
#include "actions/train.h"
#include "exec/blas_threads.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

using namespace day0;

// The backward's products are one sequence's, too small for OpenBLAS's threads to pay for their
// hand-offs (tests/bench/train_step_bench), so a single-rank run computes on one BLAS thread too
// and gives the caller's setting back after.
TEST(TrainAction, ASingleRankRunComputesOnOneBlasThreadAndRestoresTheSetting)
{
    const int before = exec::blasThreads();
    openblas_set_num_threads(2);
    actions::TrainRequest request; // the built-in task, one rank
    request.options.steps = 400;
    request.options.globalBatch = 2;
    request.options.sequenceLength = 8;
    Progress progress;
    std::atomic<bool> finished = false;
    int during = 0;
    bool seen = false;
    std::jthread run([&] {
        const auto out = actions::trainModel(request, progress);
        EXPECT_TRUE(out.ok()) << out.error().message;
        finished = true;
    });
    while (!finished && !seen) {
        const auto done = progress.done();
        if (done >= 1 && done < request.options.steps) {
            during = exec::blasThreads();
            // Still mid-run after the read: the read saw the run's setting.
            seen = progress.done() < request.options.steps;
        }
        std::this_thread::yield();
    }
    run.join();
    ASSERT_TRUE(seen) << "the run ended before a step could be watched";
    EXPECT_EQ(during, 1);
    EXPECT_EQ(exec::blasThreads(), 2);
    openblas_set_num_threads(before);
}
