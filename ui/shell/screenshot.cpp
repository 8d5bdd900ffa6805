#include "shell/screenshot.h"

#include "jobs/job_runner.h"
#include "shell/main_window.h"
#include "shell/panel_registry.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QImage>
#include <QTabWidget>
#include <QThread>

namespace day0::ui {

namespace {
constexpr int kQuietMs = 150;
}

bool waitForJobsIdle(JobRunner& jobs, int timeoutMs)
{
    QElapsedTimer total;
    total.start();
    QElapsedTimer quiet;
    quiet.start();
    while (total.elapsed() < timeoutMs) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
        if (!jobs.activeJobs().empty()) {
            quiet.restart();
        } else if (quiet.elapsed() >= kQuietMs) {
            return true;
        }
        QThread::msleep(5);
    }
    return false;
}

QStringList renderScreenshots(MainWindow& window, const PanelRegistry& registry, JobRunner& jobs,
    const QString& which, const QString& outDir, QString* error, QSize windowSize)
{
    QStringList written;
    QStringList ids;
    for (const auto& p : registry.panels()) {
        if (which == QStringLiteral("all") || which == p.id) {
            ids << p.id;
        }
    }
    if (ids.isEmpty()) {
        QStringList known;
        for (const auto& p : registry.panels()) {
            known << p.id;
        }
        *error = QCoreApplication::translate("Screenshot", "unknown panel '%1' (known: %2, all)")
                     .arg(which, known.join(QStringLiteral(", ")));
        return {};
    }
    if (!QDir().mkpath(outDir)) {
        *error
            = QCoreApplication::translate("Screenshot", "%1: cannot create the folder").arg(outDir);
        return {};
    }
    auto save = [&](const QImage& image, const QString& name) {
        const QString path = QDir(outDir).filePath(name + QStringLiteral(".png"));
        if (!image.save(path)) {
            *error
                = QCoreApplication::translate("Screenshot", "%1: could not be written").arg(path);
            return false;
        }
        written << path;
        return true;
    };
    // The default docked layout at the size asked for, as a user first sees it.
    auto showAt = [&](QSize size) {
        window.setGeometry(QRect(QPoint(0, 0), size));
        window.show();
        waitForJobsIdle(jobs, 120000);
    };
    if (which == QStringLiteral("all")) {
        showAt(kSmallScreenshotSize);
        if (!save(window.grab().toImage(), QStringLiteral("workbench-1280x720"))) {
            return {};
        }
    }
    showAt(windowSize);
    if (which == QStringLiteral("all")) {
        if (!save(window.grab().toImage(), QStringLiteral("workbench"))) {
            return {};
        }
    }
    for (const auto& id : ids) {
        QWidget* panel = window.panel(id);
        window.raisePanel(id);
        waitForJobsIdle(jobs, 60000);
        bool ok = save(panel->grab().toImage(), id);
        // A panel's further views (its tabs' pages with a "screenshotName" property) are
        // pictured too, as "<panel>-<name>": the precision panel's End to end view.
        for (auto* tabs : panel->findChildren<QTabWidget*>()) {
            const int shown = tabs->currentIndex();
            for (int i = 0; ok && i < tabs->count(); ++i) {
                const QString name = tabs->widget(i)->property("screenshotName").toString();
                if (i == shown || name.isEmpty()) {
                    continue;
                }
                tabs->setCurrentIndex(i);
                waitForJobsIdle(jobs, 60000);
                ok = save(panel->grab().toImage(), id + QLatin1Char('-') + name);
            }
            tabs->setCurrentIndex(shown);
        }
        if (!ok) {
            return {};
        }
    }
    return written;
}

} // namespace day0::ui
