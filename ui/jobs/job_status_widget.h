#pragma once

#include <QWidget>

class QLabel;
class QProgressBar;
class QTimer;
class QToolButton;

namespace day0::ui {

class JobRunner;

/// Status-bar widget showing the newest running job: its stage, a progress bar and a cancel
/// button. Polls the job's Progress every 50 ms while anything runs (Tracy/heaptrack style).
class JobStatusWidget : public QWidget {
    Q_OBJECT
public:
    explicit JobStatusWidget(JobRunner& runner, QWidget* parent = nullptr);

private:
    void poll();

    JobRunner& m_runner;
    QLabel* m_label = nullptr;
    QProgressBar* m_bar = nullptr;
    QToolButton* m_cancel = nullptr;
    QTimer* m_timer = nullptr;
};

} // namespace day0::ui
