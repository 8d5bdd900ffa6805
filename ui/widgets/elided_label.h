#pragma once

#include <QLabel>

namespace day0::ui {

/// A one-line label for text that may be longer than the room it gets (paths, checkpoint
/// sources): it asks for little width, draws the text elided to the width it has and shows the
/// full text in its tooltip whenever it is cut. GUI-thread object.
class ElidedLabel : public QLabel {
    Q_OBJECT
public:
    explicit ElidedLabel(QWidget* parent = nullptr, Qt::TextElideMode mode = Qt::ElideMiddle);

    /// Sets the full text; what is drawn is elided to the label's width.
    void setFullText(const QString& text);
    [[nodiscard]] QString fullText() const { return m_full; }
    /// True when the drawn text is shorter than the full text.
    [[nodiscard]] bool isElided() const { return text() != m_full; }

    [[nodiscard]] QSize minimumSizeHint() const override;
    [[nodiscard]] QSize sizeHint() const override;

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void elide();

    QString m_full;
    Qt::TextElideMode m_mode;
};

} // namespace day0::ui
