#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace day0 {

namespace {

    std::mutex& sinkMutex()
    {
        static std::mutex mutex;
        return mutex;
    }

    LogSink& currentSink()
    {
        static LogSink sink = [](LogLevel level, std::string_view message) {
            static constexpr const char* kNames[] = { "debug", "info", "warning", "error" };
            std::fprintf(stderr, "day0: %s: %.*s\n", kNames[int(level)], int(message.size()),
                message.data());
        };
        return sink;
    }

    std::atomic<int> g_minLevel { int(LogLevel::Info) };

} // namespace

LogSink setLogSink(LogSink sink)
{
    std::lock_guard lock(sinkMutex());
    std::swap(currentSink(), sink);
    return sink;
}

void setLogLevel(LogLevel level) { g_minLevel.store(int(level)); }

void log(LogLevel level, std::string_view message)
{
    if (int(level) < g_minLevel.load()) {
        return;
    }
    std::lock_guard lock(sinkMutex());
    if (currentSink()) {
        currentSink()(level, message);
    }
}

} // namespace day0
