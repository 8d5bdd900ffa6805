#pragma once

#include <QLayout>
#include <QList>

namespace day0::ui {

/// A row of controls that wraps onto further lines when the room is narrower than the row, so
/// a panel's tool row never sets the window's minimum width: that is its widest control. Items
/// keep their size hint; an item added with `stretch` takes what is left of its line. GUI thread.
class FlowLayout : public QLayout {
public:
    explicit FlowLayout(QWidget* parent = nullptr, int spacing = 6);
    ~FlowLayout() override;

    /// Adds `widget`; with `stretch` it widens to the end of its line.
    void addWidget(QWidget* widget, bool stretch);
    using QLayout::addWidget;

    void addItem(QLayoutItem* item) override;
    [[nodiscard]] int count() const override;
    [[nodiscard]] QLayoutItem* itemAt(int index) const override;
    QLayoutItem* takeAt(int index) override;
    [[nodiscard]] Qt::Orientations expandingDirections() const override;
    [[nodiscard]] bool hasHeightForWidth() const override { return true; }
    [[nodiscard]] int heightForWidth(int width) const override;
    void setGeometry(const QRect& rect) override;
    [[nodiscard]] QSize sizeHint() const override;
    [[nodiscard]] QSize minimumSize() const override;

private:
    /// Lays the items out in `rect` (only measures when `apply` is false); returns the height.
    int arrange(const QRect& rect, bool apply) const;

    QList<QLayoutItem*> m_items;
    QList<bool> m_stretch;
};

} // namespace day0::ui
