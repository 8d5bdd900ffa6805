#include "panels/training/gradient_view.h"

#include "jobs/job_runner.h"
#include "numerics/gradient_compare.h"
#include "panels/precision/precision_work.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"
#include "widgets/plot_widget.h"

#include <QComboBox>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace day0::ui {

namespace {

using numerics::GridMetric;

using Compared = Result<std::shared_ptr<const PrecisionRun>>;

QString sci(double v) { return QString::number(v, 'e', 2); }

} // namespace

GradientView::GradientView(JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_jobs(jobs)
    , m_ticket(std::make_unique<JobTicket>())
    , m_reference(new QLineEdit(this))
    , m_target(new QLineEdit(this))
    , m_compare(new QPushButton(tr("Compare"), this))
    , m_metric(new QComboBox(this))
    , m_findings(new QLabel(this))
    , m_plot(new PlotWidget(this))
    , m_pairLabel(new QLabel(this))
    , m_step(new QComboBox(this))
{
    m_pairLabel->setObjectName(QStringLiteral("gradientPair"));
    m_pairLabel->setWordWrap(true);
    m_step->setObjectName(QStringLiteral("gradientStep"));
    m_step->setToolTip(tr("The training step whose gradients are compared (0-based, as day0 "
                          "train prints them), among those both runs dumped"));
    m_step->hide();
    connect(m_step, &QComboBox::activated, this, [this](int index) { compareStep(index); });
    m_reference->setObjectName(QStringLiteral("gradientReference"));
    m_reference->setPlaceholderText(tr("reference gradient dump, e.g. the fp64 one"));
    m_target->setObjectName(QStringLiteral("gradientTarget"));
    m_target->setPlaceholderText(tr("target gradient dump (its <target>-inject beside it gives "
                                    "own error)"));
    m_compare->setObjectName(QStringLiteral("gradientCompare"));
    m_metric->setObjectName(QStringLiteral("gradientMetric"));
    for (const GridMetric metric : numerics::gridMetrics()) {
        m_metric->addItem(metricTitle(metric), int(metric));
    }
    m_findings->setObjectName(QStringLiteral("gradientFindings"));
    m_findings->setWordWrap(true);
    m_findings->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_plot->setObjectName(QStringLiteral("gradientHeatmap"));

    auto* browseReference = new QPushButton(tr("…"), this);
    auto* browseTarget = new QPushButton(tr("…"), this);
    connect(browseReference, &QPushButton::clicked, this,
        [this] { browse(m_reference, tr("Reference gradient dump folder")); });
    connect(browseTarget, &QPushButton::clicked, this,
        [this] { browse(m_target, tr("Target gradient dump folder")); });
    connect(m_compare, &QPushButton::clicked, this,
        [this] { compareDumps(m_reference->text(), m_target->text()); });
    connect(m_metric, &QComboBox::currentIndexChanged, this, [this] { redraw(); });

    auto* pick = new QGridLayout;
    pick->addWidget(new QLabel(tr("Reference"), this), 0, 0);
    pick->addWidget(m_reference, 0, 1);
    pick->addWidget(browseReference, 0, 2);
    pick->addWidget(new QLabel(tr("Target"), this), 1, 0);
    pick->addWidget(m_target, 1, 1);
    pick->addWidget(browseTarget, 1, 2);
    pick->addWidget(m_compare, 0, 3);
    pick->addWidget(m_metric, 1, 3);
    pick->setColumnStretch(1, 1);
    auto* pairRow = new QHBoxLayout;
    pairRow->addWidget(m_pairLabel, 1);
    pairRow->addWidget(new QLabel(tr("Step"), this));
    pairRow->addWidget(m_step);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(pairRow);
    layout->addLayout(pick);
    layout->addWidget(m_plot, 1);
    layout->addWidget(m_findings);
    showEmptyState();
}

GradientView::~GradientView() = default;

void GradientView::showEmptyState()
{
    m_plot->clear();
    m_plot->setTitle(tr("Gradient error, layers × sub-modules"));
    m_plot->setNote(
        tr("The gradient heatmap appears here: the error of each layer's output gradients "
           "(<sub-module>#grad columns) between two gradient dumps, the first divergence in "
           "backward order and each layer's own error. Make them with `day0 run CHECKPOINT "
           "--grad --precision fp64 --ids 1,2,3,4 --dump REF`, the same with --precision fp32 "
           "--dump TARGET, and for own errors with --precision fp32 --inject-from REF --dump "
           "TARGET-inject; then pick REF and TARGET above. Or select two training runs "
           "recorded with `day0 train CHECKPOINT --grad-dump DIR` (e.g. --precision f64 and "
           "f32 of the same seed): the second's gradients against the first's appear here, "
           "step by step."));
    m_plot->rescaleAndReplot();
    m_findings->clear();
}

void GradientView::browse(QLineEdit* field, const QString& title)
{
    const QString dir = QFileDialog::getExistingDirectory(this, title, field->text());
    if (!dir.isEmpty()) {
        field->setText(dir);
    }
}

void GradientView::showTrainingPair(const TrainingGradientPair& pair)
{
    const auto same = [&](const TrainingGradientPair& a) {
        if (a.reference != pair.reference || a.target != pair.target
            || a.steps.size() != pair.steps.size()) {
            return false;
        }
        for (std::size_t i = 0; i < a.steps.size(); ++i) {
            if (a.steps[i].step != pair.steps[i].step
                || a.steps[i].referenceDump != pair.steps[i].referenceDump
                || a.steps[i].targetDump != pair.steps[i].targetDump) {
                return false;
            }
        }
        return true;
    };
    if (m_pair && same(*m_pair) && !pair.steps.empty()) {
        return;
    }
    m_pair = pair;
    m_step->clear();
    for (const auto& s : pair.steps) {
        m_step->addItem(QString::number(s.step), qint64(s.step));
    }
    m_step->setVisible(!pair.steps.empty());
    if (pair.steps.empty()) {
        m_pairLabel->setText(tr("Training runs %1 and %2 dumped no step in common: dump the "
                                "same steps with --grad-steps.")
                                 .arg(pair.target, pair.reference));
        return;
    }
    m_step->setCurrentIndex(m_step->count() - 1);
    compareStep(m_step->count() - 1);
}

void GradientView::compareStep(int index)
{
    if (!m_pair || index < 0 || index >= int(m_pair->steps.size())) {
        return;
    }
    const auto& s = m_pair->steps[std::size_t(index)];
    m_pairLabel->setText(tr("Training run %1 against %2, step %3 (their --grad-dump dumps):")
                             .arg(m_pair->target, m_pair->reference)
                             .arg(s.step));
    compareDumps(s.referenceDump, s.targetDump);
    m_shownFromPair = true; // after compareDumps, which marks a comparison as picked
}

void GradientView::clearTrainingPair(const QString& why)
{
    m_pairLabel->setText(why);
    m_step->clear();
    m_step->hide();
    if (!m_pair) {
        return;
    }
    m_pair.reset();
    if (m_shownFromPair) {
        m_ticket->cancel(); // a comparison under way is no longer wanted
        m_run.reset();
        m_heatmap = {};
        m_shownFromPair = false;
        showEmptyState();
    }
}

QString GradientView::pairText() const { return m_pairLabel->text(); }

void GradientView::compareDumps(const QString& reference, const QString& target)
{
    m_shownFromPair = false;
    m_reference->setText(reference);
    m_target->setText(target);
    if (reference.isEmpty() || target.isEmpty()) {
        showError(tr("Pick a reference and a target gradient dump folder."));
        return;
    }
    m_findings->setText(tr("Comparing…"));
    m_jobs.start<Compared>(
        *m_ticket, tr("Comparing gradient dumps"), this,
        [reference = fromQString(reference), target = fromQString(target)](
            Progress& progress, std::stop_token stop) -> Compared {
            return compareDumpFolders(reference, target, progress, stop);
        },
        [this](Compared&& compared) {
            if (!compared) {
                showError(toQString(compared.error().message));
                return;
            }
            show(std::move(*compared));
        });
}

void GradientView::setMetric(GridMetric metric)
{
    const int index = m_metric->findData(int(metric));
    if (index >= 0) {
        m_metric->setCurrentIndex(index);
    }
}

void GradientView::showError(const QString& message)
{
    m_run.reset();
    m_heatmap = {};
    showEmptyState();
    m_findings->setText(QStringLiteral("<span style='color:%1'>%2</span>")
                            .arg(errorColor().name(), message.toHtmlEscaped()));
    emit compared();
}

void GradientView::show(std::shared_ptr<const PrecisionRun> run)
{
    const auto& c = run->comparison;
    if (!numerics::isGradientComparison(c)) {
        showError(tr("%1 holds no gradients: pick dumps written by day0 run --grad.")
                      .arg(toQString(c.reference.model)));
        return;
    }
    m_run = std::move(run);
    if (m_run->local && m_metric->currentData().toInt() == int(GridMetric::RelL2)) {
        // With an inject-mode dump, where each layer's own error lands is what the view is for.
        setMetric(GridMetric::OwnRelL2);
    }
    redraw();
    QStringList lines;
    lines << toQString(numerics::gradientDirectionNote(c)) + QStringLiteral(".");
    if (c.firstDivergence) {
        const auto& r = c.rows[*c.firstDivergence];
        lines << tr("First divergence (%1 error, backward order): %2 — %3")
                     .arg(toQString(c.divergenceBasis), toQString(r.name),
                         toQString(r.verdict.reason));
    } else {
        lines << tr("No divergence: every gradient is within its tolerance (%1 error).")
                     .arg(toQString(c.divergenceBasis));
    }
    if (const auto worst = numerics::largestOwnBackwardError(c)) {
        lines << tr("Largest own error: layer %1's backward (%2, own rel L2 %3).")
                     .arg(worst->layer)
                     .arg(toQString(worst->capture), sci(*worst->own));
    } else {
        lines << tr("No inject-mode dump beside the target: errors are accumulated. `day0 run "
                    "--grad --inject-from REF --dump <target>-inject` separates each layer's own.");
    }
    m_findings->setText(lines.join(QStringLiteral("\n")));
    emit compared();
}

QString GradientView::findingsText() const { return m_findings->text(); }

void GradientView::redraw()
{
    if (!m_run) {
        return;
    }
    const auto metric = GridMetric(m_metric->currentData().toInt());
    m_heatmap = layerHeatmap(m_run, metric);
    m_plot->clear();
    m_plot->setTitle(tr("%1 — gradient error, layers × sub-modules (row L's #grad column: what "
                        "layer L+1's backward passed on)")
                         .arg(toQString(m_run->label)));
    m_plot->setHeatmap(m_heatmap.data);
    m_plot->rescaleAndReplot();
}

} // namespace day0::ui
