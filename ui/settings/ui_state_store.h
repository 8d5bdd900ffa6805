#pragma once

#include <QRect>
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
    /// The geometry is fitted to the screen the window opens on (fitToScreen).
    bool restoreWindow(QMainWindow& window, int layoutVersion);

    /// `geometry` moved and shrunk to lie within `available` (a screen's available area): a
    /// layout saved on a larger screen opens whole on a smaller one.
    [[nodiscard]] static QRect fitToScreen(const QRect& geometry, const QRect& available);
    /// Fits `window` to the available area of its screen (fitToScreen); false without a screen.
    static bool fitWindowToScreen(QWidget& window);

    /// Saves / restores every named QSplitter and QHeaderView under `root`.
    void saveChildren(const QWidget& root);
    void restoreChildren(QWidget& root);

private:
    [[nodiscard]] static QString keyFor(const QWidget& widget, const QString& kind);

    QSettings& m_settings;
};

} // namespace day0::ui
