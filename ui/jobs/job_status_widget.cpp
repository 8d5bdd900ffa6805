#include "jobs/job_status_widget.h"

#include "jobs/job_runner.h"
#include "widgets/formatting.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QTimer>
#include <QToolButton>

namespace day0::ui {

namespace {
constexpr int kPollMs = 50;
constexpr int kBarSteps = 1000;
} // namespace

JobStatusWidget::JobStatusWidget(JobRunner& runner, QWidget* parent)
    : QWidget(parent)
    , m_runner(runner)
    , m_label(new QLabel(this))
    , m_bar(new QProgressBar(this))
    , m_cancel(new QToolButton(this))
    , m_timer(new QTimer(this))
{
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_label);
    layout->addWidget(m_bar);
    layout->addWidget(m_cancel);
    m_bar->setFixedWidth(140);
    m_bar->setMaximumHeight(14);
    m_bar->setTextVisible(false);
    m_cancel->setText(tr("Cancel"));
    m_cancel->setToolTip(tr("Cancel the running job (Esc)"));
    m_cancel->setAutoRaise(true);
    m_cancel->setShortcut(QKeySequence(Qt::Key_Escape));
    connect(m_cancel, &QToolButton::clicked, this, [this] { m_runner.cancelAll(); });

    m_timer->setInterval(kPollMs);
    connect(m_timer, &QTimer::timeout, this, &JobStatusWidget::poll);
    connect(&m_runner, &JobRunner::jobStarted, this, [this] {
        if (!m_timer->isActive()) {
            m_timer->start();
        }
    });
    setVisible(false);
}

void JobStatusWidget::poll()
{
    const auto jobs = m_runner.activeJobs();
    if (jobs.empty()) {
        m_timer->stop();
        setVisible(false);
        return;
    }
    const auto& job = jobs.back();
    QString text = job.title;
    if (const auto stage = job.progress->stage(); !stage.empty()) {
        text += QStringLiteral(": ") + toQString(stage);
    }
    if (jobs.size() > 1) {
        text += tr(" (+%1 more)").arg(jobs.size() - 1);
    }
    if (m_label->text() != text) {
        m_label->setText(text);
    }
    if (job.progress->total() <= 0) {
        m_bar->setRange(0, 0); // busy indicator until the total is known
    } else {
        m_bar->setRange(0, kBarSteps);
        const int value = int(job.progress->fraction() * kBarSteps);
        if (m_bar->value() != value) {
            m_bar->setValue(value);
        }
    }
    setVisible(true);
}

} // namespace day0::ui
