#include "settings/ui_state_store.h"

#include <QHeaderView>
#include <QMainWindow>
#include <QScreen>
#include <QSettings>
#include <QSplitter>

#include <algorithm>

namespace day0::ui {

namespace {
const QString kGeometry = QStringLiteral("layout/geometry");
const QString kState = QStringLiteral("layout/state");
const QString kVersion = QStringLiteral("layout/version");
} // namespace

UiStateStore::UiStateStore(QSettings& settings)
    : m_settings(settings)
{
}

void UiStateStore::saveWindow(const QMainWindow& window, int layoutVersion)
{
    m_settings.setValue(kGeometry, window.saveGeometry());
    m_settings.setValue(kState, window.saveState(layoutVersion));
    m_settings.setValue(kVersion, layoutVersion);
    saveChildren(window);
}

bool UiStateStore::restoreWindow(QMainWindow& window, int layoutVersion)
{
    if (m_settings.value(kVersion, -1).toInt() != layoutVersion) {
        return false;
    }
    const bool geometry = window.restoreGeometry(m_settings.value(kGeometry).toByteArray());
    const bool state = window.restoreState(m_settings.value(kState).toByteArray(), layoutVersion);
    restoreChildren(window);
    fitWindowToScreen(window);
    return geometry && state;
}

QRect UiStateStore::fitToScreen(const QRect& geometry, const QRect& available)
{
    if (!available.isValid()) {
        return geometry;
    }
    QRect fitted(geometry.topLeft(), geometry.size().boundedTo(available.size()));
    fitted.moveLeft(
        std::clamp(fitted.left(), available.left(), available.right() - fitted.width() + 1));
    fitted.moveTop(
        std::clamp(fitted.top(), available.top(), available.bottom() - fitted.height() + 1));
    return fitted;
}

bool UiStateStore::fitWindowToScreen(QWidget& window)
{
    const QScreen* screen = window.screen();
    if (screen == nullptr) {
        return false;
    }
    const QRect available = screen->availableGeometry();
    // The frame (title bar, borders) must fit too, not only the client area.
    const QMargins frame(window.geometry().left() - window.frameGeometry().left(),
        window.geometry().top() - window.frameGeometry().top(),
        window.frameGeometry().right() - window.geometry().right(),
        window.frameGeometry().bottom() - window.geometry().bottom());
    const QRect fitted = fitToScreen(window.geometry(), available.marginsRemoved(frame));
    if (fitted != window.geometry()) {
        window.setGeometry(fitted);
    }
    return true;
}

QString UiStateStore::keyFor(const QWidget& widget, const QString& kind)
{
    return QStringLiteral("layout/") + kind + QLatin1Char('/') + widget.objectName();
}

void UiStateStore::saveChildren(const QWidget& root)
{
    for (const auto* splitter : root.findChildren<QSplitter*>()) {
        if (!splitter->objectName().isEmpty()) {
            m_settings.setValue(
                keyFor(*splitter, QStringLiteral("splitter")), splitter->saveState());
        }
    }
    for (const auto* header : root.findChildren<QHeaderView*>()) {
        if (!header->objectName().isEmpty()) {
            m_settings.setValue(keyFor(*header, QStringLiteral("header")), header->saveState());
        }
    }
}

void UiStateStore::restoreChildren(QWidget& root)
{
    for (auto* splitter : root.findChildren<QSplitter*>()) {
        const auto value = m_settings.value(keyFor(*splitter, QStringLiteral("splitter")));
        if (!splitter->objectName().isEmpty() && value.isValid()) {
            splitter->restoreState(value.toByteArray());
        }
    }
    for (auto* header : root.findChildren<QHeaderView*>()) {
        const auto value = m_settings.value(keyFor(*header, QStringLiteral("header")));
        if (!header->objectName().isEmpty() && value.isValid()) {
            header->restoreState(value.toByteArray());
        }
    }
}

} // namespace day0::ui
