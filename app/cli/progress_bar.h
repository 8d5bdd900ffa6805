#pragma once

#include "base/progress.h"

#include <atomic>
#include <string>
#include <thread>

namespace day0::cli {

/// Draws a Progress as a bar on stderr (only when stderr is a terminal and not quiet), refreshed
/// every 100 ms from its own thread until destroyed.
class ProgressBar {
public:
    ProgressBar(const Progress& progress, std::string label, bool enabled = true);
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

private:
    void draw(bool final) const;

    const Progress& m_progress;
    std::string m_label;
    std::atomic<bool> m_stop { false };
    std::thread m_thread;
    bool m_enabled = false;
};

} // namespace day0::cli
