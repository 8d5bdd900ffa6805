#include "progress_bar.h"

#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>

namespace day0::cli {

ProgressBar::ProgressBar(const Progress& progress, std::string label, bool enabled)
    : m_progress(progress)
    , m_label(std::move(label))
    , m_enabled(enabled && isatty(STDERR_FILENO))
{
    if (!m_enabled) {
        return;
    }
    m_thread = std::thread([this] {
        while (!m_stop.load()) {
            draw(false);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    });
}

ProgressBar::~ProgressBar()
{
    if (!m_enabled) {
        return;
    }
    m_stop.store(true);
    m_thread.join();
    draw(true);
}

void ProgressBar::draw(bool final) const
{
    constexpr int kWidth = 30;
    const double f = final ? 1.0 : m_progress.fraction();
    const int filled = int(f * kWidth);
    std::string bar(std::size_t(filled), '#');
    bar.append(std::size_t(kWidth - filled), '.');
    auto stage = m_progress.stage();
    if (stage.size() > 40) {
        stage = "…" + stage.substr(stage.size() - 39);
    }
    fmt::print(stderr, "\r\033[K{} [{}] {:3.0f}% {}", m_label, bar, f * 100.0, stage);
    if (final) {
        fmt::print(stderr, "\n");
    }
    std::fflush(stderr);
}

} // namespace day0::cli
