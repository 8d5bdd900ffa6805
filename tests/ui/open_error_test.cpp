// One way to show errors: a trace that cannot be opened (empty, or not a trace) is reported as a
// model that cannot be opened is: the same dialog title, the problem naming the file, and what
// to do.
#include "panels/builtin_panels.h"
#include "shell/main_window.h"
#include "shell/panel_registry.h"
#include "ui_test_support.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>

using namespace day0;
using namespace day0::ui;

TEST(OpenErrors, ABadTraceGetsTheDialogABadConfigGets)
{
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    PanelRegistry registry;
    registerBuiltinPanels(registry);
    Session session;
    JobRunner jobs;
    MainWindow window(registry, session, jobs, settings);
    QSignalSpy reported(&window, &MainWindow::openErrorReported);

    window.openModel(dir.filePath(QStringLiteral("missing/config.json")));
    test::settle(jobs);
    ASSERT_EQ(reported.count(), 1);
    const QString modelTitle = reported.at(0).at(0).toString();
    EXPECT_TRUE(modelTitle.startsWith(QStringLiteral("Cannot open "))) << fromQString(modelTitle);
    EXPECT_FALSE(reported.at(0).at(2).toString().isEmpty()) << "what to do";

    const QString empty = dir.filePath(QStringLiteral("empty.json"));
    QFile file(empty);
    ASSERT_TRUE(file.open(QIODevice::WriteOnly));
    file.close(); // an empty file

    session.requestTraceOpen({ empty });
    QElapsedTimer clock;
    clock.start();
    while (reported.count() < 2 && clock.elapsed() < 30000) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    }
    test::settle(jobs);
    ASSERT_EQ(reported.count(), 2) << "the empty trace is reported as the bad config was";
    EXPECT_TRUE(reported.at(1).at(0).toString().startsWith(QStringLiteral("Cannot open ")));
    EXPECT_TRUE(reported.at(1).at(1).toString().contains(QStringLiteral("empty.json")))
        << fromQString(reported.at(1).at(1).toString());
    EXPECT_TRUE(reported.at(1).at(2).toString().contains(QStringLiteral("Nsight Systems")))
        << fromQString(reported.at(1).at(2).toString());
}
