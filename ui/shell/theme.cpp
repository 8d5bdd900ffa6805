#include "shell/theme.h"

#include <QApplication>
#include <QStyle>
#include <QStyleFactory>

namespace day0::ui {

namespace {

QPalette makePalette(QColor window, QColor base, QColor alternate, QColor text, QColor button,
    QColor highlight, QColor disabledText, QColor link)
{
    QPalette p;
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, alternate);
    p.setColor(QPalette::ToolTipBase, base);
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, disabledText);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, button);
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, Qt::white);
    p.setColor(QPalette::Highlight, highlight);
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, link);
    p.setColor(QPalette::Light, button.lighter(130));
    p.setColor(QPalette::Midlight, button.lighter(115));
    p.setColor(QPalette::Mid, button.darker(130));
    p.setColor(QPalette::Dark, button.darker(160));
    p.setColor(QPalette::Shadow, QColor(0, 0, 0, 120));
    for (const auto role : { QPalette::WindowText, QPalette::Text, QPalette::ButtonText }) {
        p.setColor(QPalette::Disabled, role, disabledText);
    }
    return p;
}

} // namespace

QPalette lightPalette()
{
    return makePalette(QColor(0xef, 0xf0, 0xf2), QColor(0xff, 0xff, 0xff), QColor(0xf5, 0xf6, 0xf8),
        QColor(0x1f, 0x23, 0x28), QColor(0xe6, 0xe8, 0xeb), QColor(0x2f, 0x6f, 0xd0),
        QColor(0x8a, 0x90, 0x99), QColor(0x1a, 0x5f, 0xb4));
}

QPalette darkPalette()
{
    return makePalette(QColor(0x25, 0x27, 0x2b), QColor(0x1b, 0x1d, 0x20), QColor(0x22, 0x25, 0x29),
        QColor(0xdc, 0xde, 0xe2), QColor(0x32, 0x35, 0x3a), QColor(0x3d, 0x7e, 0xdb),
        QColor(0x70, 0x75, 0x7d), QColor(0x6c, 0xa8, 0xf0));
}

bool isDarkPalette(const QPalette& palette)
{
    return palette.color(QPalette::Window).lightness() < 128;
}

void applyTheme(ThemeChoice choice)
{
    if (auto* fusion = QStyleFactory::create(QStringLiteral("Fusion"))) {
        QApplication::setStyle(fusion);
    }
    bool dark = choice == ThemeChoice::Dark;
    if (choice == ThemeChoice::System) {
        // An empty palette resolves to the platform's, which tells whether the system is dark.
        QApplication::setPalette(QPalette());
        dark = isDarkPalette(QApplication::palette());
    }
    QApplication::setPalette(dark ? darkPalette() : lightPalette());
}

} // namespace day0::ui
