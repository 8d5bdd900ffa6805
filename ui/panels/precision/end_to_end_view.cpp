#include "panels/precision/end_to_end_view.h"

#include "actions/run.h"
#include "history/recording.h"
#include "jobs/job_runner.h"
#include "panels/precision/target_precision_box.h"
#include "session/session.h"
#include "widgets/colors.h"
#include "widgets/flow_layout.h"
#include "widgets/formatting.h"
#include "widgets/plot_widget.h"

#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace day0::ui {

Result<std::shared_ptr<const EndToEndResult>> runEndToEnd(
    const EndToEndRequest& request, Progress& progress, std::stop_token stop)
{
    auto checkpoint = actions::checkpointForSource(request.modelSource, progress, stop);
    if (!checkpoint) {
        return checkpoint.error();
    }
    // `day0 eval CKPT --reference fp64 --target T --sample-corpus N --seed S --seq-len L
    // --generate G`: the same action, so the GUI's record is the CLI's.
    actions::EvalRequest eval;
    eval.checkpoint = checkpoint->string();
    eval.reference = request.reference;
    eval.targetPlan = request.target;
    eval.corpus.sampleSequences = request.sequences;
    eval.corpus.seed = request.seed;
    eval.corpus.sequenceLength = request.sequenceLength;
    eval.generation.tokens = request.generate;
    eval.generation.prompts = std::min<std::int64_t>(request.sequences, 4);
    auto outcome = actions::evaluate(eval, progress, stop);
    if (!outcome) {
        return outcome.error();
    }
    auto result = std::make_shared<EndToEndResult>();
    result->outcome = std::move(*outcome);
    // The limits the verdict was judged by, for the summary line (evaluate judged by the same
    // table: the default one, as `day0 eval` without --tolerances).
    if (auto table = numerics::resolveToleranceTable(eval.tolerances)) {
        if (const auto* rule = table->matchEndToEnd(exec::precisionDType(request.target.base))) {
            result->rule = *rule;
        }
    }
    const auto& record = result->outcome.record;
    if (request.recordOnce) {
        auto recorded = history::recordRunOnce(record);
        if (!recorded) {
            result->recordError = recorded.error().message;
        } else if (*recorded && (*recorded)->added) {
            result->recordedRun = (*recorded)->id.value();
        }
    } else {
        auto recorded = history::recordRun(record);
        if (!recorded) {
            result->recordError = recorded.error().message;
        } else if (*recorded) {
            result->recordedRun = (*recorded)->value();
        }
    }
    return std::shared_ptr<const EndToEndResult>(std::move(result));
}

namespace {

QString sci(double v) { return QString::number(v, 'e', 2); }

} // namespace

std::size_t histogramFirstBin(const numerics::KlHistogram& histogram)
{
    const auto& c = histogram.counts;
    const auto it = std::find_if(c.begin(), c.end(), [](std::int64_t n) { return n > 0; });
    const auto first = std::size_t(it - c.begin());
    return it == c.end() ? 0 : (first > 0 ? first - 1 : 0);
}

std::size_t histogramLastBin(const numerics::KlHistogram& histogram)
{
    const auto& c = histogram.counts;
    const auto it = std::find_if(c.rbegin(), c.rend(), [](std::int64_t n) { return n > 0; });
    if (it == c.rend()) {
        return c.empty() ? 0 : c.size() - 1;
    }
    const auto last = std::size_t(c.rend() - it) - 1;
    return std::min(last + 1, c.size() - 1);
}

namespace {

// One generation's ids with the first divergent one marked.
QString idsHtml(
    const std::vector<std::int64_t>& ids, std::optional<std::int64_t> mark, const QColor& color)
{
    QStringList parts;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const QString id = QString::number(ids[i]);
        parts << (mark && std::int64_t(i) == *mark
                ? QStringLiteral("<b style=\"color:%1\">[%2]</b>").arg(color.name(), id)
                : id);
    }
    return parts.join(QLatin1Char(' '));
}

} // namespace

EndToEndView::EndToEndView(Session& session, JobRunner& jobs,
    std::function<bool(const QString&)> runsShrunk, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_runsShrunk(std::move(runsShrunk))
    , m_ticket(std::make_unique<JobTicket>())
    , m_poll(new QTimer(this))
    , m_histogram(new PlotWidget(this))
    , m_position(new PlotWidget(this))
    , m_strip(new PlotWidget(this))
{
    m_histogram->setObjectName(QStringLiteral("endToEndHistogram"));
    m_position->setObjectName(QStringLiteral("endToEndPosition"));
    m_strip->setObjectName(QStringLiteral("endToEndStrip"));
    m_poll->setInterval(50);
    connect(m_poll, &QTimer::timeout, this, &EndToEndView::pollProgress);

    m_summary = new QLabel(this);
    m_summary->setObjectName(QStringLiteral("endToEndSummary"));
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error = new QLabel(this);
    m_error->setObjectName(QStringLiteral("endToEndError"));
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: %1").arg(errorColor().name()));
    m_error->hide();
    m_generations = new QLabel(this);
    m_generations->setObjectName(QStringLiteral("endToEndGenerations"));
    m_generations->setWordWrap(true);
    m_generations->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_generations->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(m_generations);
    scroll->setWidgetResizable(true);

    auto* grid = new QGridLayout;
    grid->addWidget(m_histogram, 0, 0);
    grid->addWidget(m_position, 0, 1);
    grid->addWidget(m_strip, 1, 0, 1, 2);
    grid->addWidget(scroll, 2, 0, 1, 2);
    grid->setColumnStretch(0, 2);
    grid->setColumnStretch(1, 3);
    grid->setRowStretch(0, 5);
    grid->setRowStretch(1, 2);
    grid->setRowStretch(2, 3);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(createControls());
    layout->addWidget(m_summary);
    layout->addWidget(m_error);
    layout->addLayout(grid, 1);

    m_histogram->setNote(tr("No evaluation yet: press Evaluate."));
    m_histogram->rescaleAndReplot();
    // A demo evaluation follows the model; one the user started stays.
    connect(&m_session, &Session::modelChanged, this, [this] {
        if (!m_userAction) {
            m_demoDone = false;
        }
        startDemoIfWanted();
    });
}

EndToEndView::~EndToEndView() = default;

QWidget* EndToEndView::createControls()
{
    auto* box = new QWidget(this);
    // Wraps in a narrow dock rather than widen the window.
    auto* row = new FlowLayout(box);
    m_target = createTargetPrecisionBox(box);
    m_target->setObjectName(QStringLiteral("endToEndTarget"));
    const auto spin = [box](const char* name, int low, int high, int value, const QString& tip) {
        auto* s = new QSpinBox(box);
        s->setObjectName(QString::fromLatin1(name));
        s->setRange(low, high);
        s->setValue(value);
        s->setToolTip(tip);
        return s;
    };
    m_sequences = spin("endToEndSequences", 1, 256, 4,
        tr("Sequences sampled from the reference itself (in-distribution text)"));
    m_length = spin("endToEndLength", 2, 1024, 32, tr("Tokens per sequence"));
    m_generate = spin("endToEndGenerate", 0, 256, 16,
        tr("Greedy tokens generated under both from the first sequences' first 8 tokens"));
    m_seed = spin("endToEndSeed", 0, 1000000, 1, tr("Seed of the sampled corpus"));
    m_runButton = new QPushButton(tr("Evaluate"), box);
    m_runButton->setObjectName(QStringLiteral("endToEndRun"));
    m_cancelButton = new QPushButton(tr("Cancel"), box);
    m_cancelButton->setObjectName(QStringLiteral("endToEndCancel"));
    m_cancelButton->setEnabled(false);
    m_progress = new QProgressBar(box);
    m_progress->setRange(0, 1000);
    m_progress->setMaximumWidth(220);
    m_progress->hide();
    row->addWidget(new QLabel(tr("Target"), box));
    row->addWidget(m_target);
    row->addWidget(new QLabel(tr("vs fp64 over"), box));
    row->addWidget(m_sequences);
    row->addWidget(new QLabel(tr("sampled sequences ×"), box));
    row->addWidget(m_length);
    row->addWidget(new QLabel(tr("tokens, seed"), box));
    row->addWidget(m_seed);
    row->addWidget(new QLabel(tr("generate"), box));
    row->addWidget(m_generate);
    row->addWidget(m_runButton);
    row->addWidget(m_cancelButton);
    row->addWidget(m_progress);
    connect(m_runButton, &QPushButton::clicked, this, &EndToEndView::startFromControls);
    connect(m_cancelButton, &QPushButton::clicked, this, &EndToEndView::cancel);
    return box;
}

void EndToEndView::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    startDemoIfWanted();
}

void EndToEndView::startDemoIfWanted()
{
    // As the panel's demo: seconds of CPU, once, only for a view someone looks at and a model
    // that runs shrunk.
    if (m_demoDone || !isVisible() || !m_session.hasModel()
        || !m_runsShrunk(m_session.modelSource())) {
        return;
    }
    m_demoDone = true;
    EndToEndRequest request;
    request.recordOnce = true;
    startJob(std::move(request));
}

void EndToEndView::startFromControls()
{
    EndToEndRequest request;
    const exec::PrecisionPlan target = targetPrecisionOf(*m_target);
    request.target.base = target.base;
    request.target.fp8Scaling = target.fp8Scaling;
    request.sequences = m_sequences->value();
    request.sequenceLength = m_length->value();
    request.generate = m_generate->value();
    request.seed = std::uint64_t(m_seed->value());
    run(std::move(request));
}

void EndToEndView::run(EndToEndRequest request)
{
    m_demoDone = true;
    m_userAction = true;
    startJob(std::move(request));
}

void EndToEndView::cancel()
{
    m_ticket->cancel();
    pollProgress();
    m_summary->setText(tr("Cancelled."));
}

void EndToEndView::startJob(EndToEndRequest request)
{
    if (request.modelSource.empty()) {
        if (!m_session.hasModel()) {
            m_error->setText(tr("No model is open: open a model or a checkpoint folder first."));
            m_error->show();
            return;
        }
        request.modelSource = fromQString(m_session.modelSource());
    }
    m_title = tr("End-to-end eval: %1 vs %2")
                  .arg(toQString(request.target.describe()), toQString(request.reference));
    m_error->hide();
    m_summary->setText(m_title + QStringLiteral("…"));
    m_runButton->setEnabled(false);
    m_cancelButton->setEnabled(true);
    m_progress->setValue(0);
    m_progress->show();
    m_poll->start();
    m_jobs.start<Outcome>(
        *m_ticket, m_title, this,
        [request](Progress& progress, std::stop_token stop) {
            return runEndToEnd(request, progress, stop);
        },
        [this](Outcome&& outcome) { deliver(std::move(outcome)); });
}

void EndToEndView::pollProgress()
{
    if (!m_ticket->busy()) {
        m_poll->stop();
        m_progress->hide();
        m_runButton->setEnabled(true);
        m_cancelButton->setEnabled(false);
        return;
    }
    for (const auto& job : m_jobs.activeJobs()) {
        if (job.title == m_title && job.progress) {
            m_progress->setValue(int(std::lround(job.progress->fraction() * 1000)));
            m_progress->setFormat(toQString(job.progress->stage()));
        }
    }
}

void EndToEndView::deliver(Outcome&& outcome)
{
    pollProgress();
    if (!outcome) {
        if (outcome.error().code != ErrorCode::Cancelled) {
            m_error->setText(toQString(outcome.error().message));
            m_error->show();
        }
        m_summary->setText(m_result ? m_summary->text() : QString());
        showResult();
        emit resultDelivered();
        return;
    }
    m_result = std::move(*outcome);
    if (m_result->recordedRun) {
        m_session.announceRecordedRun(*m_result->recordedRun);
    } else if (!m_result->recordError.empty()) {
        emit m_session.statusMessage(
            tr("The evaluation was not recorded: %1").arg(toQString(m_result->recordError)));
    }
    showResult();
    emit resultDelivered();
}

void EndToEndView::showResult()
{
    if (!m_result) {
        return;
    }
    const auto& o = m_result->outcome;
    const auto& s = o.summary;
    const auto& v = o.verdict;

    // Summary: llama.cpp's `perplexity --kl-divergence` figures (mean KL ± 95 % interval,
    // 1.96 standard errors as numerics/end_to_end.h's summary carries them) and the verdict.
    QString text
        = tr("<b>%1 vs %2</b> over %3 positions (%4 windows): mean KL <b>%5 ± %6</b> "
             "nats (95 %), p99 %7, same top <b>%8 %</b>, PPL ratio %9 ± %10")
              .arg(toQString(o.targetName).toHtmlEscaped(),
                  toQString(o.referenceName).toHtmlEscaped(), QString::number(s.positions),
                  QString::number(o.windows), sci(s.klMean.value), sci(1.96 * s.klMean.uncertainty),
                  sci(s.klP99), QString::number(100.0 * s.sameTop.value, 'f', 2),
                  QString::number(s.pplRatio.value, 'f', 5),
                  QString::number(s.pplRatio.uncertainty, 'f', 5));
    const QColor verdictColor
        = v.status == numerics::VerdictStatus::Fail ? errorColor() : okColor();
    text += tr("<br>Verdict: <b style=\"color:%1\">%2</b> — %3")
                .arg(verdictColor.name(),
                    toQString(std::string(numerics::verdictStatusName(v.status))),
                    toQString(v.reason).toHtmlEscaped());
    if (const auto& r = m_result->rule) {
        text += tr(" [%1 of %2: mean KL ≤ %3, p99 ≤ %4, same top ≥ %5 %]")
                    .arg(toQString(r->id), toQString(v.table), sci(r->maxKlMean), sci(r->maxKlP99),
                        QString::number(100.0 * r->minSameTop, 'f', 1));
    }
    if (m_result->recordedRun) {
        text += tr("; recorded as run %1").arg(*m_result->recordedRun);
    }
    m_summary->setText(text);

    // KL histogram on log10 bins, labelled by their lower edge: the occupied range with one
    // empty bin either side (the table's bins span 10^-16 and up).
    const auto& h = s.histogram;
    const auto firstBin = histogramFirstBin(h);
    const auto lastBin = histogramLastBin(h);
    QStringList bins;
    BarLayer counts { tr("positions"), categoricalColor(0), {} };
    for (std::size_t b = firstBin; b <= lastBin && b < h.counts.size(); ++b) {
        bins << QString::number(h.log10Low + double(b) * h.binWidth, 'g', 3);
        counts.values << double(h.counts[b]);
    }
    m_histogram->clear();
    m_histogram->setTitle(tr("KL per position (log10 bins)"));
    m_histogram->setAxisLabel(PlotWidget::Axis::X, tr("log10 KL (nats), bin's lower edge"));
    m_histogram->setAxisLabel(PlotWidget::Axis::Y, tr("positions"));
    m_histogram->setAxisFormat(PlotWidget::Axis::Y, AxisFormat::Count);
    m_histogram->setStackedBars(bins, { counts });
    m_histogram->rescaleAndReplot();

    // Mean KL at each position of the window, hover with the same-top share there.
    PlotSeries kl { tr("mean KL"), categoricalColor(0), {}, {} };
    kl.markers = true;
    for (std::size_t p = 0; p < s.klByPosition.size(); ++p) {
        kl.x << double(p);
        kl.y << s.klByPosition[p];
        kl.pointLabels << tr("position %1: mean KL %2, same top %3 % (%4 positions)")
                              .arg(p)
                              .arg(sci(s.klByPosition[p]))
                              .arg(100.0 * s.sameTopByPosition[p], 0, 'f', 1)
                              .arg(s.countByPosition[p]);
    }
    m_position->clear();
    m_position->setTitle(tr("Mean KL against position in the window"));
    m_position->setAxisLabel(PlotWidget::Axis::X, tr("position"));
    m_position->setAxisLabel(PlotWidget::Axis::Y, tr("mean KL (nats)"));
    m_position->setLogScale(PlotWidget::Axis::Y, true);
    m_position->setLineSeries({ kl });
    if (const auto& r = m_result->rule) {
        m_position->addHorizontalLine({ r->maxKlMean, tr("rule's mean KL limit"), errorColor() });
    }
    m_position->rescaleAndReplot();

    // Same-top strip: one cell per scored position, 1 agree, 0 disagree; a row per window
    // when the windows score equally many positions (a sampled corpus), else rows of at most
    // 64 in corpus order. At least two rows: the colour map cannot draw a single one.
    const auto& same = o.sameTopStrip;
    const int n = int(same.size());
    int rowLength = n;
    if (o.windows >= 2 && n % o.windows == 0) {
        rowLength = n / int(o.windows);
    } else if (n > 1) {
        const int rows = std::max(2, (n + 63) / 64);
        rowLength = (n + rows - 1) / rows;
    }
    HeatmapData strip;
    strip.columns = std::max(1, rowLength);
    strip.rows = n == 0 ? 0 : (n + strip.columns - 1) / strip.columns;
    const bool perWindow = o.windows >= 2 && strip.rows == o.windows;
    for (int r = 0; r < strip.rows; ++r) {
        strip.rowLabels << (perWindow ? tr("window %1").arg(r)
                                      : QString::number(r * strip.columns));
    }
    for (int i = 0; i < strip.rows * strip.columns; ++i) {
        strip.values << (i < n ? double(same[std::size_t(i)]) : std::nan(""));
    }
    for (int c = 0; c < strip.columns; ++c) {
        strip.columnLabels << QString::number(c);
    }
    strip.valueLabel = tr("1: same top-1");
    strip.cellText = [same, columns = strip.columns](int row, int column) {
        const std::size_t i = std::size_t(row) * std::size_t(columns) + std::size_t(column);
        if (i >= same.size()) {
            return QString();
        }
        return QObject::tr("scored position %1: %2")
            .arg(i)
            .arg(same[i] != 0 ? QObject::tr("same top-1") : QObject::tr("top-1 differs"));
    };
    m_strip->clear();
    m_strip->setTitle(tr("Same top-1 at each scored position (%1 of %2 agree)")
                          .arg(std::count(same.begin(), same.end(), std::uint8_t(1)))
                          .arg(n));
    m_strip->setHeatmap(strip);
    m_strip->rescaleAndReplot();

    // Generation diff: reference and target ids side by side, the first divergence marked.
    QString gen;
    if (o.generations.empty()) {
        gen = tr("No generation check.");
    }
    for (std::size_t g = 0; g < o.generations.size(); ++g) {
        const auto& d = o.generations[g];
        QStringList prompt;
        for (const auto id : d.prompt) {
            prompt << QString::number(id);
        }
        gen += tr("<p><b>Prompt %1</b> (%2): ").arg(g).arg(prompt.join(QLatin1Char(' ')));
        if (!d.firstDivergence) {
            gen += tr("identical over %n generated token(s)", nullptr, int(d.reference.size()));
        } else {
            gen += tr("diverge at generated token <b>%1</b> after %2 in common — <b>%3</b> "
                      "(margin %4 vs resolution %5)")
                       .arg(*d.firstDivergence)
                       .arg(d.commonPrefix)
                       .arg(d.nearTie ? tr("near-tie") : tr("real divergence"))
                       .arg(sci(d.margin), sci(d.resolution));
        }
        const QColor mark = d.nearTie ? QColor(0xef, 0x6c, 0x00) : errorColor();
        gen += tr("<br>&nbsp;&nbsp;reference: %1<br>&nbsp;&nbsp;target:&nbsp;&nbsp;&nbsp; %2</p>")
                   .arg(idsHtml(d.reference, d.firstDivergence, mark),
                       idsHtml(d.target, d.firstDivergence, mark));
    }
    m_generations->setText(gen);
}

QString EndToEndView::summaryText() const { return m_summary->text(); }

QString EndToEndView::generationText() const { return m_generations->text(); }

QString EndToEndView::errorText() const
{
    return m_error->isVisibleTo(this) ? m_error->text() : QString();
}

} // namespace day0::ui
