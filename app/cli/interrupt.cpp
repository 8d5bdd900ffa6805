#include "interrupt.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace day0::cli {

namespace {

std::atomic<bool> g_interrupted { false };

extern "C" void onSignal(int sig)
{
    if (g_interrupted.exchange(true)) {
        std::signal(sig, SIG_DFL);
        std::raise(sig);
    }
}

} // namespace

std::stop_token interruptToken()
{
    static std::stop_source source;
    static const bool installed = [] {
        std::signal(SIGINT, onSignal);
        std::signal(SIGTERM, onSignal);
        // request_stop is not async-signal-safe, so a watcher thread forwards the flag.
        std::thread([] {
            while (!g_interrupted.load()) {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
            source.request_stop();
        }).detach();
        return true;
    }();
    (void)installed;
    return source.get_token();
}

} // namespace day0::cli
