#pragma once

#include <QString>

class QMainWindow;
class QSettings;
class QSplitter;
class QHeaderView;
class QWidget;

namespace day0::ui {

/// Window geometry, dock layout, splitter positions and table headers, kept apart from the
/// preferences (GammaRay's UIStateManager). Widgets are addressed by their objectName.
class UiStateStore {
public:
    explicit UiStateStore(QSettings& settings);

    /// Saves geometry and dock/toolbar state; `layoutVersion` invalidates old layouts.
    void saveWindow(const QMainWindow& window, int layoutVersion);
    /// Restores what saveWindow stored; false when nothing (or an older layout) was stored.
    bool restoreWindow(QMainWindow& window, int layoutVersion);

    /// Saves / restores every named QSplitter and QHeaderView under `root`.
    void saveChildren(const QWidget& root);
    void restoreChildren(QWidget& root);

private:
    [[nodiscard]] static QString keyFor(const QWidget& widget, const QString& kind);

    QSettings& m_settings;
};

} // namespace day0::ui
