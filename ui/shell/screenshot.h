#pragma once

#include <QSize>
#include <QString>
#include <QStringList>

namespace day0::ui {

class JobRunner;
class MainWindow;
class PanelRegistry;

/// Waits (running the event loop) until no job has run for a short quiet period, or `timeoutMs`
/// passes. Returns false on timeout.
bool waitForJobsIdle(JobRunner& jobs, int timeoutMs);

/// The window sizes README pictures are taken at: a full-HD desktop and a small laptop.
inline const QSize kScreenshotSize(1920, 1080);
inline const QSize kSmallScreenshotSize(1280, 720);

/// Renders the default docked layout to PNG files in `outDir`, the window at `windowSize`:
/// panel `which` ("model", ...) raised in its dock as `<id>.png`, or with "all" every panel so
/// and the whole window as workbench.png plus workbench-1280x720.png at kSmallScreenshotSize.
/// A panel's further views (its tabs' pages with a "screenshotName" property) are pictured as
/// `<id>-<name>.png`. Returns the files written, or an error message in `error`.
QStringList renderScreenshots(MainWindow& window, const PanelRegistry& registry, JobRunner& jobs,
    const QString& which, const QString& outDir, QString* error,
    QSize windowSize = kScreenshotSize);

} // namespace day0::ui
