#pragma once

#include <QWidget>

namespace day0::ui {

/// The timeline's empty state picture: a sketch of what the timeline shows (a CPU thread
/// launching kernels, copies and a collective on two streams) in the legend's colours.
class TimelineSketch : public QWidget {
public:
    explicit TimelineSketch(QWidget* parent = nullptr);

protected:
    void paintEvent(QPaintEvent* event) override;
};

} // namespace day0::ui
