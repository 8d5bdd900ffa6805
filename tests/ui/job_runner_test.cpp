#include "jobs/job_runner.h"
#include "shell/screenshot.h"

#include <QCoreApplication>
#include <QObject>
#include <QThread>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace day0;
using namespace day0::ui;

namespace {

// Work that waits until released (or stopped), so tests control the order of completion.
std::function<int(Progress&, std::stop_token)> gatedWork(std::atomic<bool>& gate, int value)
{
    return [&gate, value](Progress& progress, std::stop_token stop) {
        progress.setTotal(1);
        while (!gate.load() && !stop.stop_requested()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        progress.advance();
        return value;
    };
}

} // namespace

TEST(JobRunner, DeliversResultOnGuiThread)
{
    JobRunner runner;
    JobTicket ticket;
    QObject receiver;
    int got = 0;
    QThread* deliveredOn = nullptr;
    runner.start<int>(
        ticket, QStringLiteral("answer"), &receiver, [](Progress&, std::stop_token) { return 42; },
        [&](int&& v) {
            got = v;
            deliveredOn = QThread::currentThread();
        });
    runner.waitForIdle();
    EXPECT_EQ(got, 42);
    EXPECT_EQ(deliveredOn, QCoreApplication::instance()->thread());
    EXPECT_FALSE(ticket.busy());
    EXPECT_TRUE(runner.activeJobs().empty());
}

TEST(JobRunner, NewestRequestWins)
{
    JobRunner runner;
    JobTicket ticket;
    QObject receiver;
    std::atomic<bool> gate { false };
    std::vector<int> delivered;
    std::atomic<bool> firstSawStop { false };
    runner.start<int>(
        ticket, QStringLiteral("first"), &receiver,
        [&](Progress& p, std::stop_token stop) {
            const int v = gatedWork(gate, 1)(p, stop);
            firstSawStop = stop.stop_requested();
            return v;
        },
        [&](int&& v) { delivered.push_back(v); });
    runner.start<int>(ticket, QStringLiteral("second"), &receiver, gatedWork(gate, 2),
        [&](int&& v) { delivered.push_back(v); });
    EXPECT_EQ(runner.activeJobs().size(), 2u);
    gate = true;
    runner.waitForIdle();
    ASSERT_EQ(delivered.size(), 1u);
    EXPECT_EQ(delivered.front(), 2);
    EXPECT_TRUE(firstSawStop.load()) << "the superseded job must be asked to stop";
}

TEST(JobRunner, StagesArriveInOrderOnTheGuiThreadBeforeTheResult)
{
    JobRunner runner;
    JobTicket ticket;
    QObject receiver;
    std::vector<std::string> events;
    bool allOnGui = true;
    runner.startStaged<int, int>(
        ticket, QStringLiteral("staged"), &receiver,
        [](Progress&, std::stop_token, const std::function<void(int&&)>& stage) {
            stage(1);
            stage(2);
            return 3;
        },
        [&](int&& v) {
            events.push_back("stage " + std::to_string(v));
            allOnGui
                = allOnGui && QThread::currentThread() == QCoreApplication::instance()->thread();
        },
        [&](int&& v) { events.push_back("result " + std::to_string(v)); });
    runner.waitForIdle();
    EXPECT_EQ(events, (std::vector<std::string> { "stage 1", "stage 2", "result 3" }));
    EXPECT_TRUE(allOnGui);
}

TEST(JobRunner, StagesOfASupersededJobAreDropped)
{
    JobRunner runner;
    JobTicket ticket;
    QObject receiver;
    std::atomic<bool> gate { false };
    std::vector<int> stages;
    std::vector<int> results;
    runner.startStaged<int, int>(
        ticket, QStringLiteral("old"), &receiver,
        [&](Progress& p, std::stop_token stop, const std::function<void(int&&)>& stage) {
            const int v = gatedWork(gate, 1)(p, stop);
            stage(10); // after the newer request: never shown
            return v;
        },
        [&](int&& v) { stages.push_back(v); }, [&](int&& v) { results.push_back(v); });
    runner.startStaged<int, int>(
        ticket, QStringLiteral("new"), &receiver,
        [](Progress&, std::stop_token, const std::function<void(int&&)>& stage) {
            stage(20);
            return 2;
        },
        [&](int&& v) { stages.push_back(v); }, [&](int&& v) { results.push_back(v); });
    gate = true;
    runner.waitForIdle();
    EXPECT_EQ(stages, (std::vector<int> { 20 }));
    EXPECT_EQ(results, (std::vector<int> { 2 }));
}

TEST(JobRunner, DestroyedReceiverGetsNothing)
{
    JobRunner runner;
    JobTicket ticket;
    std::atomic<bool> gate { false };
    bool delivered = false;
    auto* receiver = new QObject;
    runner.start<int>(ticket, QStringLiteral("orphan"), receiver, gatedWork(gate, 7),
        [&](int&&) { delivered = true; });
    delete receiver;
    gate = true;
    runner.waitForIdle();
    EXPECT_FALSE(delivered);
    EXPECT_TRUE(runner.activeJobs().empty());
}

TEST(JobRunner, CancelStopsWorkAndDropsResult)
{
    JobRunner runner;
    JobTicket ticket;
    QObject receiver;
    std::atomic<bool> gate { false };
    bool delivered = false;
    runner.start<int>(ticket, QStringLiteral("cancel me"), &receiver, gatedWork(gate, 3),
        [&](int&&) { delivered = true; });
    ASSERT_EQ(runner.activeJobs().size(), 1u);
    runner.cancelAll(); // what the status bar's Cancel button does
    runner.waitForIdle(); // returns although the gate never opens: the work saw the stop
    EXPECT_FALSE(delivered);
}

TEST(JobRunner, WaitForJobsIdleReturnsAfterWork)
{
    JobRunner runner;
    JobTicket ticket;
    QObject receiver;
    int got = 0;
    runner.start<int>(
        ticket, QStringLiteral("short"), &receiver,
        [](Progress&, std::stop_token) {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            return 5;
        },
        [&](int&& v) { got = v; });
    EXPECT_TRUE(waitForJobsIdle(runner, 5000));
    EXPECT_EQ(got, 5);
}
