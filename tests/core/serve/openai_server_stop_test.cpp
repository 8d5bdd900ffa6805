// OpenAiServer::stop() against serve() on another thread: a stop asked before the listen has
// begun must still end it (httplib's own stop() does nothing until then, and serve() would then
// accept for ever: a Serving panel test hung in its server's destructor that way).
#include "exec/precision.h"
#include "serve/openai_server.h"
#include "serve/scheduler.h"
#include "serve/served_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

using namespace day0;
using namespace day0::serve;

namespace {

const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

/// Binds a server, serves it on a thread started `delay` after the stop is asked (a negative
/// delay: stops that long after serving began), and says whether serve() returned within 20 s.
bool stopEndsServe(Scheduler& scheduler, const ServedModel& model, std::chrono::microseconds delay)
{
    ServerOptions o;
    o.port = 0;
    o.threads = 2;
    auto server = std::make_unique<OpenAiServer>(scheduler, model, o);
    EXPECT_TRUE(server->bind().ok());
    std::promise<void> returned;
    auto done = returned.get_future();
    const auto before = delay.count() > 0 ? delay : std::chrono::microseconds(0);
    const auto after = delay.count() < 0 ? -delay : std::chrono::microseconds(0);
    std::thread serving([&, before] {
        std::this_thread::sleep_for(before);
        server->serve();
        returned.set_value();
    });
    std::this_thread::sleep_for(after);
    server->stop();
    if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
        // Left serving: the thread and the server are abandoned, not destroyed under it.
        serving.detach();
        (void)server.release();
        return false;
    }
    serving.join();
    return true;
}

} // namespace

TEST(OpenAiServerStop, AStopAskedBeforeOrJustAfterServeBeganEndsIt)
{
    Progress progress;
    auto loaded = loadServedModel(kTiny, false, progress, {});
    ASSERT_TRUE(loaded) << loaded.error().message;
    SchedulerOptions so;
    so.plan = *exec::parsePrecisionPlan("fp32");
    ServedModel model;
    model.name = "tiny-llama";
    model.vocabSize = loaded->engine->spec().vocabSize;
    model.contextLimit = 64;
    Scheduler scheduler(std::move(*loaded->engine), so);
    // The stop comes first: serve() starts 2 ms later and must not listen.
    EXPECT_TRUE(stopEndsServe(scheduler, model, std::chrono::microseconds(2000)));
    // serve() starts first and the stop follows after 0 to 500 us, at times before the listen
    // has begun, at times after.
    for (int i = 0; i < 50; ++i) {
        EXPECT_TRUE(stopEndsServe(scheduler, model, -std::chrono::microseconds(i * 10)))
            << "stop " << i * 10 << " us after serve()";
    }
}
