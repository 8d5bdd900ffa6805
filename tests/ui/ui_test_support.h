#pragma once

#include "hardware/cluster.h"
#include "history/recording.h"
#include "history/run_store.h"
#include "jobs/job_runner.h"
#include "model/config_reader.h"
#include "plan/model_summary.h"
#include "plan/parallel_plan.h"
#include "session/session.h"
#include "shell/screenshot.h"
#include "widgets/formatting.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QImage>
#include <QTemporaryDir>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

namespace day0::ui::test {

/// Opens a bundled model into `session` the way the main window does (graph + summary).
inline void openModel(Session& session, const std::string& name)
{
    auto spec = model::loadModel(name);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    auto graph = std::make_shared<const model::LayerGraph>(model::buildLayerGraph(*spec));
    auto summary = std::make_shared<const plan::ModelSummary>(plan::summarizeModel(*graph));
    session.setModel(graph, summary, QString::fromStdString(name));
}

/// Sets cluster, mode and plan.
inline void configure(
    Session& session, const std::string& cluster, plan::Mode mode, const std::string& planText)
{
    auto c = hardware::parseCluster(cluster);
    ASSERT_TRUE(c.ok()) << c.error().message;
    session.setCluster(*c, QString::fromStdString(cluster));
    auto w = session.workload();
    w.mode = mode;
    session.setWorkload(w);
    auto p = plan::parsePlan(planText);
    ASSERT_TRUE(p.ok()) << p.error().message;
    session.setPlan(*p);
}

/// Runs the event loop until `done()` holds or `ms` milliseconds have passed; returns done().
template <typename F> bool waitFor(F done, int ms)
{
    QElapsedTimer clock;
    clock.start();
    while (!done() && clock.elapsed() < ms) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    }
    return done();
}

/// Runs the event loop until every job has delivered.
inline void settle(JobRunner& jobs)
{
    ASSERT_TRUE(waitForJobsIdle(jobs, 60000)) << "jobs did not finish";
}

/// Standard deviation of the grey level: 0 for a blank image.
inline double pixelSpread(const QImage& image)
{
    double sum = 0;
    double sum2 = 0;
    const double n = double(image.width()) * image.height();
    for (int y = 0; y < image.height(); ++y) {
        for (int x = 0; x < image.width(); ++x) {
            const double g = qGray(image.pixel(x, y));
            sum += g;
            sum2 += g * g;
        }
    }
    const double mean = sum / n;
    return std::sqrt(std::max(0.0, sum2 / n - mean * mean));
}

/// Points the shrunk-checkpoint cache ($XDG_CACHE_HOME) at a fresh folder for one test.
class ScopedCache {
public:
    ScopedCache()
        : m_old(qgetenv("XDG_CACHE_HOME"))
    {
        qputenv("XDG_CACHE_HOME", m_dir.path().toUtf8());
    }
    ~ScopedCache() { qputenv("XDG_CACHE_HOME", m_old); }
    ScopedCache(const ScopedCache&) = delete;
    ScopedCache& operator=(const ScopedCache&) = delete;

private:
    QTemporaryDir m_dir;
    QByteArray m_old;
};

/// Points the process's recording (and so the runs panel) at a fresh store for one test.
class ScratchStore {
public:
    ScratchStore()
        : m_saved(history::recordingOptions())
    {
        auto options = m_saved;
        options.store = fromQString(m_dir.filePath(QStringLiteral("runs.sqlite")));
        options.enabled = true;
        history::setRecordingOptions(options);
    }
    ~ScratchStore() { history::setRecordingOptions(m_saved); }
    ScratchStore(const ScratchStore&) = delete;
    ScratchStore& operator=(const ScratchStore&) = delete;

    [[nodiscard]] history::RunStore open() const
    {
        auto store = history::RunStore::open(history::storePath());
        EXPECT_TRUE(store.ok()) << store.error().message;
        return std::move(store).value();
    }
    [[nodiscard]] QString dir() const { return m_dir.path(); }

private:
    QTemporaryDir m_dir;
    history::RecordingOptions m_saved;
};

} // namespace day0::ui::test
