#include "settings/preferences.h"
#include "settings/ui_state_store.h"

#include <QMainWindow>
#include <QScreen>
#include <QSettings>
#include <QSplitter>
#include <QTemporaryDir>
#include <gtest/gtest.h>

using namespace day0::ui;

TEST(Preferences, DefaultsWhenNothingStored)
{
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("p.ini")), QSettings::IniFormat);
    const Preferences p = Preferences::load(settings);
    EXPECT_EQ(p.theme, ThemeChoice::System);
    EXPECT_EQ(p.defaultModel, QStringLiteral("kimi-k2"));
    EXPECT_EQ(p.defaultCluster, QStringLiteral("h200:32x8"));
    EXPECT_TRUE(p.defaultTraining);
    EXPECT_TRUE(p.recentModels.isEmpty());
}

TEST(Preferences, RoundTrip)
{
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("p.ini"));
    Preferences p;
    p.theme = ThemeChoice::Dark;
    p.defaultCluster = QStringLiteral("b200:4x8");
    p.defaultTraining = false;
    p.addRecent(QStringLiteral("deepseek-v3"));
    p.addRecent(QStringLiteral("/models/foo"));
    {
        QSettings settings(path, QSettings::IniFormat);
        p.save(settings);
    }
    QSettings settings(path, QSettings::IniFormat);
    const Preferences q = Preferences::load(settings);
    EXPECT_EQ(q.theme, ThemeChoice::Dark);
    EXPECT_EQ(q.defaultCluster, QStringLiteral("b200:4x8"));
    EXPECT_FALSE(q.defaultTraining);
    EXPECT_EQ(q.recentModels,
        (QStringList { QStringLiteral("/models/foo"), QStringLiteral("deepseek-v3") }));
}

TEST(Preferences, RecentListIsMostRecentFirstWithoutDuplicatesAndBounded)
{
    Preferences p;
    p.maxRecentModels = 3;
    for (const char* m : { "a", "b", "c", "a", "d" }) {
        p.addRecent(QString::fromLatin1(m));
    }
    EXPECT_EQ(p.recentModels,
        (QStringList { QStringLiteral("d"), QStringLiteral("a"), QStringLiteral("c") }));
}

TEST(Preferences, MalformedValuesFallBackToDefaults)
{
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("p.ini")), QSettings::IniFormat);
    settings.setValue(QStringLiteral("preferences/theme"), QStringLiteral("purple"));
    settings.setValue(QStringLiteral("preferences/maxRecentModels"), -5);
    const Preferences p = Preferences::load(settings);
    EXPECT_EQ(p.theme, ThemeChoice::System);
    EXPECT_EQ(p.maxRecentModels, 0);
}

TEST(UiStateStore, RestoresSplittersAndRejectsOldLayouts)
{
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    QByteArray saved;
    {
        QMainWindow window;
        auto* splitter = new QSplitter(&window);
        splitter->setObjectName(QStringLiteral("split"));
        splitter->addWidget(new QWidget);
        splitter->addWidget(new QWidget);
        window.setCentralWidget(splitter);
        window.resize(800, 600);
        window.show();
        splitter->setSizes({ 200, 600 });
        saved = splitter->saveState();
        UiStateStore(settings).saveWindow(window, 3);
    }
    QMainWindow window;
    auto* splitter = new QSplitter(&window);
    splitter->setObjectName(QStringLiteral("split"));
    splitter->addWidget(new QWidget);
    splitter->addWidget(new QWidget);
    window.setCentralWidget(splitter);
    EXPECT_FALSE(UiStateStore(settings).restoreWindow(window, 4)) << "layout version changed";
    EXPECT_TRUE(UiStateStore(settings).restoreWindow(window, 3));
    EXPECT_EQ(splitter->saveState(), saved);
}

TEST(UiStateStore, ASavedGeometryLargerThanTheScreenIsClampedOnRestore)
{
    // Saved on a larger monitor (or grown by content): restored inside the screen it opens on.
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    QMainWindow big;
    const QRect screen = big.screen()->availableGeometry();
    {
        big.setGeometry(
            screen.left() + 300, screen.top() + 200, screen.width() + 900, screen.height() + 700);
        UiStateStore(settings).saveWindow(big, 3);
    }
    QMainWindow window;
    ASSERT_TRUE(UiStateStore(settings).restoreWindow(window, 3));
    EXPECT_LE(window.frameGeometry().width(), screen.width());
    EXPECT_LE(window.frameGeometry().height(), screen.height());
    EXPECT_TRUE(screen.contains(window.geometry()))
        << window.geometry().x() << "," << window.geometry().y();
}
