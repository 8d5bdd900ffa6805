#pragma once

#include "serve/serve_bench.h"

#include <QString>
#include <QWidget>

#include <vector>

namespace day0::ui {

/// One request of a bench level as the timeline draws it, in seconds from the level's start.
struct RequestBar {
    int index = 0; ///< the request's index in its level
    double sent = 0.0;
    double firstToken = -1.0; ///< when its first token arrived; < 0: none arrived
    double end = 0.0; ///< completed or failed
    bool failed = false;
    QString error; ///< "timeout: no byte for 300 s", empty when it completed
    std::vector<double> tokens; ///< when each chunk carrying tokens arrived
};

/// The bars of a level's requests, in index order: send to end, the first token and each later
/// token chunk from TTFT and the inter-token gaps the bench recorded.
std::vector<RequestBar> requestBars(const serve::BenchResult& result);

/// A level's requests, one horizontal bar each from send to end: the wait for the first token
/// (TTFT) in one colour, the decode in another, a tick per token chunk where rows are tall
/// enough, failed requests outlined and crossed in the error colour. Rows share a pixel when
/// they outnumber the widget's height. The tooltip names the request under the pointer.
/// GUI-thread widget.
class RequestTimeline : public QWidget {
    Q_OBJECT
public:
    explicit RequestTimeline(QWidget* parent = nullptr);

    /// Shows `result`'s requests under the title `label`.
    void setLevel(const QString& label, const serve::BenchResult& result);
    /// Shows `text` instead of bars.
    void setEmptyText(const QString& text);

    [[nodiscard]] bool showsEmptyState() const { return m_bars.empty(); }
    [[nodiscard]] const QString& emptyText() const { return m_empty; }
    [[nodiscard]] const QString& title() const { return m_title; }
    [[nodiscard]] const std::vector<RequestBar>& bars() const { return m_bars; }
    /// The request drawn at `pos`; -1 when none.
    [[nodiscard]] int barAt(QPoint pos) const;

    [[nodiscard]] QSize sizeHint() const override { return { 480, 200 }; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    [[nodiscard]] QRect plotRect() const;
    [[nodiscard]] double span() const;

    QString m_title;
    QString m_empty;
    std::vector<RequestBar> m_bars;
};

} // namespace day0::ui
