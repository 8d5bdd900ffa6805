#pragma once

#include <QString>
#include <QStringList>

class QSettings;

namespace day0::ui {

/// Colour scheme of the workbench.
enum class ThemeChoice { System, Light, Dark };

/// Every user preference, with its default, in one place (Tracy's Config, Qt Creator's aspects).
/// Window geometry and dock layout are not preferences: UiStateStore keeps those.
struct Preferences {
    ThemeChoice theme = ThemeChoice::System;
    QStringList recentModels; ///< newest first: folders, config.json paths or bundled names
    int maxRecentModels = 10;
    QString lastOpenDir; ///< where the open dialogs start
    QString defaultModel = QStringLiteral("kimi-k2"); ///< what opens with no arguments
    QString defaultCluster = QStringLiteral("h200:32x8");
    bool defaultTraining = true; ///< training workload (else inference) on start
    /// Device memory the planner leaves free beyond its estimate, percent (0-50): a plan at 95%
    /// of device memory is not one to trust on Day 0.
    int planHeadroomPercent = 10;

    /// Moves `model` to the front of the recent list, trimming it to maxRecentModels.
    void addRecent(const QString& model);

    /// Reads preferences; missing or malformed keys keep their defaults.
    static Preferences load(QSettings& settings);
    /// Writes every preference.
    void save(QSettings& settings) const;
};

} // namespace day0::ui
