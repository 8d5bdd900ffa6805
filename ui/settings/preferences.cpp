#include "settings/preferences.h"

#include <QSettings>

#include <algorithm>

namespace day0::ui {

namespace {

// Every key string lives here and nowhere else.
const QString kTheme = QStringLiteral("preferences/theme");
const QString kRecent = QStringLiteral("preferences/recentModels");
const QString kMaxRecent = QStringLiteral("preferences/maxRecentModels");
const QString kLastOpenDir = QStringLiteral("preferences/lastOpenDir");
const QString kDefaultModel = QStringLiteral("preferences/defaultModel");
const QString kDefaultCluster = QStringLiteral("preferences/defaultCluster");
const QString kDefaultTraining = QStringLiteral("preferences/defaultTraining");
const QString kPlanHeadroom = QStringLiteral("preferences/planHeadroomPercent");

QString themeKey(ThemeChoice theme)
{
    switch (theme) {
    case ThemeChoice::Light:
        return QStringLiteral("light");
    case ThemeChoice::Dark:
        return QStringLiteral("dark");
    case ThemeChoice::System:
        break;
    }
    return QStringLiteral("system");
}

ThemeChoice themeFromKey(const QString& key)
{
    if (key == QStringLiteral("light")) {
        return ThemeChoice::Light;
    }
    if (key == QStringLiteral("dark")) {
        return ThemeChoice::Dark;
    }
    return ThemeChoice::System;
}

} // namespace

void Preferences::addRecent(const QString& model)
{
    if (model.isEmpty()) {
        return;
    }
    recentModels.removeAll(model);
    recentModels.prepend(model);
    while (recentModels.size() > std::max(0, maxRecentModels)) {
        recentModels.removeLast();
    }
}

Preferences Preferences::load(QSettings& settings)
{
    Preferences p;
    p.theme = themeFromKey(settings.value(kTheme, themeKey(p.theme)).toString());
    p.maxRecentModels = std::clamp(settings.value(kMaxRecent, p.maxRecentModels).toInt(), 0, 50);
    p.recentModels = settings.value(kRecent).toStringList().mid(0, p.maxRecentModels);
    p.lastOpenDir = settings.value(kLastOpenDir, p.lastOpenDir).toString();
    p.defaultModel = settings.value(kDefaultModel, p.defaultModel).toString();
    p.defaultCluster = settings.value(kDefaultCluster, p.defaultCluster).toString();
    p.defaultTraining = settings.value(kDefaultTraining, p.defaultTraining).toBool();
    bool ok = false;
    const int headroom = settings.value(kPlanHeadroom, p.planHeadroomPercent).toInt(&ok);
    if (ok && headroom >= 0 && headroom <= 50) {
        p.planHeadroomPercent = headroom;
    }
    return p;
}

void Preferences::save(QSettings& settings) const
{
    settings.setValue(kTheme, themeKey(theme));
    settings.setValue(kRecent, recentModels);
    settings.setValue(kMaxRecent, maxRecentModels);
    settings.setValue(kLastOpenDir, lastOpenDir);
    settings.setValue(kDefaultModel, defaultModel);
    settings.setValue(kDefaultCluster, defaultCluster);
    settings.setValue(kDefaultTraining, defaultTraining);
    settings.setValue(kPlanHeadroom, planHeadroomPercent);
}

} // namespace day0::ui
