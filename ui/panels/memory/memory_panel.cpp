#include "panels/memory/memory_panel.h"

#include "jobs/job_runner.h"
#include "session/session.h"
#include "widgets/colors.h"
#include "widgets/formatting.h"
#include "widgets/key_columns.h"
#include "widgets/plot_widget.h"

#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTimer>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace day0::ui {

namespace {

constexpr int kNoDtype = -1; // combo data for "the core's default"

QComboBox* dtypeCombo(
    QWidget* parent, const QString& defaultLabel, std::initializer_list<DType> dtypes)
{
    auto* combo = new QComboBox(parent);
    combo->addItem(defaultLabel, kNoDtype);
    for (auto dtype : dtypes) {
        combo->addItem(toQString(plan::shortDtypeName(dtype)), int(dtype));
    }
    return combo;
}

void selectData(QComboBox* combo, int data)
{
    const int index = combo->findData(data);
    combo->setCurrentIndex(index >= 0 ? index : 0);
}

std::optional<DType> comboDtype(const QComboBox* combo)
{
    const int data = combo->currentData().toInt();
    return data == kNoDtype ? std::nullopt : std::optional<DType>(DType(data));
}

QString gib(Bytes bytes) { return QString::number(bytes.gib(), 'f', 1) + QStringLiteral(" GiB"); }

} // namespace

MemoryPanel::MemoryPanel(Session& session, JobRunner& jobs, QWidget* parent)
    : QWidget(parent)
    , m_session(session)
    , m_jobs(jobs)
    , m_ticket(std::make_unique<JobTicket>())
    , m_debounce(new QTimer(this))
    , m_stageChart(new PlotWidget(this))
    , m_sweepChart(new PlotWidget(this))
{
    // Coalesce the signals of one edit (plan and workload) into one estimate.
    m_debounce->setSingleShot(true);
    m_debounce->setInterval(0);
    connect(m_debounce, &QTimer::timeout, this, [this] {
        if (!m_session.ready()) {
            return;
        }
        auto summary = m_session.summary();
        m_jobs.start<Estimate>(
            *m_ticket, tr("Estimating memory"), this,
            [summary, plan = m_session.plan(), workload = m_session.workload(),
                cluster = m_session.cluster()](Progress& progress, std::stop_token stop) {
                // The figures tree shows every figure's derivation; the length sweep below
                // needs only the bytes.
                Estimate e { plan::estimateMemory(*summary, plan, workload, cluster, {},
                                 plan::Derive::WithDerivations),
                    {} };
                if (!e.report) {
                    return e;
                }
                // Memory of the most loaded rank from 1K to 128K tokens (or the model's limit).
                const bool train = workload.mode == plan::Mode::Train;
                progress.setTotal(8);
                for (int length = 1024; length <= 131072 && !stop.stop_requested(); length *= 2) {
                    auto w = workload;
                    (train ? w.seqLength : w.context) = length;
                    if (!train) {
                        w.prefillChunk = std::min(w.prefillChunk, length);
                    }
                    if (auto r = plan::estimateMemory(*summary, plan, w, cluster)) {
                        e.sweep.push_back({ double(length), r->perRank.front() });
                    }
                    progress.advance();
                }
                return e;
            },
            [this](Estimate&& estimate) { display(std::move(estimate)); });
    });

    m_verdict = new QLabel(this);
    m_verdict->setObjectName(QStringLiteral("memoryVerdict"));
    QFont big = m_verdict->font();
    big.setPointSizeF(big.pointSizeF() * 1.25);
    big.setBold(true);
    m_verdict->setFont(big);
    m_verdict->setWordWrap(true);
    m_verdict->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_details = new QLabel(this);
    m_details->setWordWrap(true);
    m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);

    // Every figure with how it was computed: tooltips, and the selected one in the pane beside.
    m_figures = new QTreeWidget(this);
    m_figures->setObjectName(QStringLiteral("memoryFigures"));
    m_figures->setHeaderLabels({ tr("Figure"), tr("Per GPU") });
    m_figures->setRootIsDecorated(true);
    m_figures->setUniformRowHeights(true);
    m_figures->setToolTip(tr("Select a figure to see its formula and inputs"));
    setKeyColumns(*m_figures, { 0, 1 });
    m_figureDetails = new QPlainTextEdit(this);
    m_figureDetails->setObjectName(QStringLiteral("memoryFigureDetails"));
    m_figureDetails->setReadOnly(true);
    m_figureDetails->setLineWrapMode(QPlainTextEdit::WidgetWidth);
    m_figureDetails->setPlaceholderText(
        tr("Select a figure on the left to see its formula, its inputs and where each came from"));
    connect(m_figures, &QTreeWidget::currentItemChanged, this, &MemoryPanel::showSelectedFigure);
    auto* figures = new QSplitter(Qt::Horizontal, this);
    figures->setObjectName(QStringLiteral("memoryFigureSplitter"));
    figures->addWidget(m_figures);
    figures->addWidget(m_figureDetails);
    figures->setSizes({ 300, 500 });

    auto* charts = new QSplitter(Qt::Vertical, this);
    charts->setObjectName(QStringLiteral("memoryChartSplitter"));
    charts->addWidget(m_stageChart);
    charts->addWidget(m_sweepChart);
    charts->addWidget(figures);
    charts->setSizes({ 450, 300, 250 });

    auto* right = new QWidget(this);
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    rightLayout->addWidget(m_verdict);
    rightLayout->addWidget(m_details);
    rightLayout->addWidget(charts, 1);

    auto* scroll = new QScrollArea(this);
    scroll->setWidget(createControls());
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setMinimumWidth(scroll->widget()->sizeHint().width() + 16);
    scroll->setMaximumWidth(scroll->widget()->sizeHint().width() + 40);

    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->addWidget(scroll);
    layout->addWidget(right, 1);

    for (auto signal : { &Session::modelChanged, &Session::clusterChanged,
             &Session::workloadChanged, &Session::planChanged }) {
        connect(&m_session, signal, this, [this] {
            syncControls();
            schedule();
        });
    }
    syncControls();
    schedule();
}

MemoryPanel::~MemoryPanel() = default;

QWidget* MemoryPanel::createControls()
{
    auto* box = new QWidget(this);
    auto* column = new QVBoxLayout(box);
    column->setContentsMargins(0, 0, 0, 0);
    auto group = [&](const QString& title) {
        auto* g = new QGroupBox(title, box);
        auto* form = new QFormLayout(g);
        form->setLabelAlignment(Qt::AlignRight);
        form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
        column->addWidget(g);
        return form;
    };
    auto spin = [&](const char* name, int min, int max, const QString& tip) {
        auto* s = new QSpinBox(box);
        s->setObjectName(QString::fromLatin1(name));
        s->setRange(min, max);
        s->setToolTip(tip);
        s->setAccelerated(true);
        connect(s, &QSpinBox::valueChanged, this, &MemoryPanel::controlsEdited);
        return s;
    };
    auto combo = [&](QComboBox* c, const char* name) {
        c->setObjectName(QString::fromLatin1(name));
        connect(c, &QComboBox::currentIndexChanged, this, &MemoryPanel::controlsEdited);
        return c;
    };

    auto* workload = group(tr("Workload"));
    m_mode = combo(new QComboBox(box), "modeCombo");
    m_mode->addItem(tr("Training"), int(plan::Mode::Train));
    m_mode->addItem(tr("Inference"), int(plan::Mode::Infer));
    workload->addRow(tr("Mode"), m_mode);
    m_length = spin("lengthSpin", 128, 1048576,
        tr("Training: tokens per sequence. Inference: tokens held in the KV cache per sequence."));
    m_length->setSingleStep(1024);
    workload->addRow(tr("Sequence"), m_length);
    m_batch = spin("batchSpin", 1, 1 << 20,
        tr("Training: sequences per optimizer step. Inference: concurrent sequences per replica."));
    workload->addRow(tr("Batch"), m_batch);

    auto* parallel = group(tr("Parallelism"));
    m_tp = spin("tpSpin", 1, 1024, tr("Tensor parallel ranks"));
    m_pp = spin("ppSpin", 1, 1024, tr("Pipeline stages"));
    m_ep = spin("epSpin", 1, 4096, tr("Expert parallel ranks"));
    m_etp = spin("etpSpin", 0, 1024, tr("Expert tensor parallel ranks (0: same as TP)"));
    m_etp->setSpecialValueText(tr("= TP"));
    m_dp = spin("dpSpin", 0, 65536, tr("Data parallel replicas (0: the rest of the cluster)"));
    m_dp->setSpecialValueText(tr("rest"));
    m_cp = spin("cpSpin", 1, 1024, tr("Context parallel ranks"));
    m_vpp = spin("vppSpin", 1, 64, tr("Virtual pipeline stages per rank (interleaved 1F1B)"));
    parallel->addRow(tr("TP"), m_tp);
    parallel->addRow(tr("PP"), m_pp);
    parallel->addRow(tr("EP"), m_ep);
    parallel->addRow(tr("ETP"), m_etp);
    parallel->addRow(tr("DP"), m_dp);
    parallel->addRow(tr("CP"), m_cp);
    parallel->addRow(tr("VPP"), m_vpp);

    auto* training = group(tr("Training"));
    m_microBatch = spin("microBatchSpin", 1, 4096, tr("Sequences per micro-batch"));
    training->addRow(tr("Micro-batch"), m_microBatch);
    m_zero = combo(new QComboBox(box), "zeroCombo");
    m_zero->addItem(tr("0 · none"), 0);
    m_zero->addItem(tr("1 · optimizer"), 1);
    m_zero->addItem(tr("2 · + gradients"), 2);
    m_zero->addItem(tr("3 · + weights"), 3);
    training->addRow(tr("ZeRO"), m_zero);
    m_recompute = combo(new QComboBox(box), "recomputeCombo");
    for (auto r : { plan::Recompute::None, plan::Recompute::Selective, plan::Recompute::Full }) {
        m_recompute->addItem(toQString(plan::recomputeName(r)), int(r));
    }
    training->addRow(tr("Recompute"), m_recompute);

    auto* dtypes = group(tr("Data types"));
    m_weights = combo(
        dtypeCombo(box, tr("default"), { DType::BF16, DType::F8E4M3, DType::F16, DType::F32 }),
        "weightsCombo");
    m_weights->setToolTip(tr("default: the checkpoint's dtypes for inference, BF16 for training"));
    m_kv = combo(dtypeCombo(box, tr("default (bf16)"), { DType::F8E4M3, DType::F16, DType::F32 }),
        "kvCombo");
    m_optimizer = combo(dtypeCombo(box, tr("fp32"), { DType::BF16 }), "optimizerCombo");
    dtypes->addRow(tr("Weights"), m_weights);
    dtypes->addRow(tr("KV cache"), m_kv);
    dtypes->addRow(tr("Optimizer"), m_optimizer);

    auto* cli = group(tr("Plan"));
    m_command = new QLineEdit(box);
    m_command->setReadOnly(true);
    m_command->setToolTip(tr("The plan as day0 memory --plan reads it"));
    cli->addRow(m_command);
    column->addStretch(1);
    return box;
}

void MemoryPanel::syncControls()
{
    m_syncing = true;
    const auto& p = m_session.plan();
    const auto& w = m_session.workload();
    const bool train = w.mode == plan::Mode::Train;
    selectData(m_mode, int(w.mode));
    m_length->setValue(train ? w.seqLength : w.context);
    m_batch->setValue(train ? w.globalBatch : w.batch);
    m_tp->setValue(p.tp);
    m_pp->setValue(p.pp);
    m_ep->setValue(p.ep);
    m_etp->setValue(p.etp);
    m_dp->setValue(p.dp);
    m_cp->setValue(p.cp);
    m_vpp->setValue(p.vpp);
    m_microBatch->setValue(p.microBatch);
    selectData(m_zero, p.zero);
    selectData(m_recompute, int(p.recompute));
    selectData(m_weights, p.weights ? int(*p.weights) : kNoDtype);
    selectData(m_kv, p.kv ? int(*p.kv) : kNoDtype);
    selectData(m_optimizer, p.optimizer == DType::F32 ? kNoDtype : int(p.optimizer));
    for (QWidget* control : { static_cast<QWidget*>(m_microBatch), static_cast<QWidget*>(m_zero),
             static_cast<QWidget*>(m_recompute), static_cast<QWidget*>(m_optimizer) }) {
        control->setEnabled(train);
    }
    m_command->setText(toQString(plan::formatPlan(p)));
    m_command->setCursorPosition(0);
    m_syncing = false;
}

void MemoryPanel::controlsEdited()
{
    if (m_syncing) {
        return;
    }
    auto w = m_session.workload();
    const auto mode = plan::Mode(m_mode->currentData().toInt());
    if (mode != w.mode) {
        // The length and batch fields change meaning with the mode: keep each mode's values.
        w.mode = mode;
        m_session.setWorkload(w);
        return;
    }
    const bool train = mode == plan::Mode::Train;
    (train ? w.seqLength : w.context) = m_length->value();
    (train ? w.globalBatch : w.batch) = m_batch->value();
    auto p = m_session.plan();
    p.tp = m_tp->value();
    p.pp = m_pp->value();
    p.ep = m_ep->value();
    p.etp = m_etp->value();
    p.dp = m_dp->value();
    p.cp = m_cp->value();
    p.vpp = m_vpp->value();
    p.microBatch = m_microBatch->value();
    p.zero = m_zero->currentData().toInt();
    p.recompute = plan::Recompute(m_recompute->currentData().toInt());
    p.weights = comboDtype(m_weights);
    p.kv = comboDtype(m_kv);
    p.optimizer = comboDtype(m_optimizer).value_or(DType::F32);
    m_session.setWorkload(w);
    m_session.setPlan(p);
}

void MemoryPanel::schedule() { m_debounce->start(); }

QString MemoryPanel::verdict() const { return m_verdict->text(); }

void MemoryPanel::display(Estimate&& estimate)
{
    if (!estimate.report) {
        m_report.reset();
        m_figures->clear();
        m_figureDetails->clear();
        m_verdict->setText(toQString(estimate.report.error().message));
        m_verdict->setStyleSheet(QStringLiteral("color: %1;").arg(errorColor().name()));
        m_details->setText(tr("The plan cannot run on %1; change the controls on the left.")
                               .arg(toQString(m_session.cluster().name)));
        m_stageChart->clear();
        m_stageChart->setNote(tr("no valid layout"));
        m_stageChart->rescaleAndReplot();
        m_sweepChart->clear();
        m_sweepChart->rescaleAndReplot();
        return;
    }
    m_report = std::move(estimate.report.value());
    const auto& r = *m_report;
    const auto& peak = r.perRank.front();
    if (r.fits) {
        m_verdict->setText(
            tr("Fits: rank %1 (stage %2) needs %3 of %4, %5 free")
                .arg(peak.rank)
                .arg(peak.ppStage)
                .arg(gib(r.maxTotal), gib(r.deviceMemory), gib(r.deviceMemory - r.maxTotal)));
        m_verdict->setStyleSheet(QStringLiteral("color: %1;").arg(okColor().name()));
    } else {
        m_verdict->setText(tr("Does not fit by %1 on rank %2 (stage %3): needs %4 of %5")
                               .arg(gib(r.maxTotal - r.deviceMemory))
                               .arg(peak.rank)
                               .arg(peak.ppStage)
                               .arg(gib(r.maxTotal), gib(r.deviceMemory)));
        m_verdict->setStyleSheet(QStringLiteral("color: %1;").arg(errorColor().name()));
    }
    const auto& l = r.layout;
    QString details = tr("%1 GPUs: tp %2 · pp %3 · ep %4 · etp %5 · dp %6 · cp %7")
                          .arg(l.world)
                          .arg(l.tp)
                          .arg(l.pp)
                          .arg(l.ep)
                          .arg(l.etp)
                          .arg(l.dp)
                          .arg(l.cp);
    if (l.mode == plan::Mode::Train) {
        details += tr(" · %1 micro-batches of %2 · sp %3 · vpp %4")
                       .arg(l.numMicroBatches)
                       .arg(l.microBatch)
                       .arg(l.sp ? tr("on") : tr("off"))
                       .arg(l.vpp);
    }
    const auto& peakRank = r.perRank.front();
    if (!peakRank.kvByKind.empty()) {
        QStringList kinds;
        for (const auto& k : peakRank.kvByKind) {
            kinds << tr("%1 %2 (%3 layers)")
                         .arg(toQString(model::mixerKindName(k.kind)), bytesText(k.bytes))
                         .arg(k.layers);
        }
        details += tr("<br>KV cache and state of rank %1 by layer kind: %2")
                       .arg(peakRank.rank)
                       .arg(kinds.join(QStringLiteral(", ")));
    }
    if (r.partial) {
        details += tr("<br><b>Partial reading:</b> these figures leave out %1")
                       .arg(toQString([&] {
                           std::string list;
                           for (const auto& i : r.ignored) {
                               list += (list.empty() ? "" : ", ") + i;
                           }
                           return list;
                       }())
                                .toHtmlEscaped());
    }
    m_details->setText(details);
    QStringList notes;
    for (const auto& note : r.notes) {
        notes << QStringLiteral("• ") + toQString(note);
    }
    m_details->setToolTip(notes.join(QLatin1Char('\n')));
    showStages(r);
    showSweep(estimate.sweep, double(r.deviceMemory.value));
    showFigures(r);
}

void MemoryPanel::showFigures(const plan::MemoryReport& r)
{
    // Keep the reader's place: the same figure of the same stage stays selected.
    const QTreeWidgetItem* current = m_figures->currentItem();
    const QString keep = current != nullptr ? current->data(0, Qt::UserRole).toString() : QString();
    m_figures->clear();
    QTreeWidgetItem* select = nullptr;
    for (const auto& stage : r.perRank) {
        auto* top = new QTreeWidgetItem(m_figures,
            { tr("stage %1 · ranks %2-%3")
                    .arg(stage.ppStage)
                    .arg(stage.rank)
                    .arg(stage.rank + stage.ranks - 1),
                bytesText(stage.total) });
        for (const auto& d : stage.derivations) {
            const QString name = toQString(d.figure);
            auto* item = new QTreeWidgetItem(top, { name, bytesText(d.bytes) });
            const QString text = toQString(d.text());
            item->setToolTip(0, text);
            item->setToolTip(1, text);
            item->setTextAlignment(1, Qt::AlignRight | Qt::AlignVCenter);
            item->setData(0, Qt::UserRole, QStringLiteral("%1/%2").arg(stage.ppStage).arg(name));
            item->setData(1, Qt::UserRole, text);
            if (item->data(0, Qt::UserRole).toString() == keep) {
                select = item;
            }
        }
        const plan::Derivation* total = plan::findDerivation(stage.derivations, "total");
        if (total != nullptr) {
            const QString text = toQString(total->text());
            top->setToolTip(0, text);
            top->setToolTip(1, text);
            top->setData(1, Qt::UserRole, text);
        }
        top->setTextAlignment(1, Qt::AlignRight | Qt::AlignVCenter);
    }
    if (m_figures->topLevelItemCount() > 0) {
        m_figures->topLevelItem(0)->setExpanded(true); // the most loaded stage
    }
    if (select == nullptr && m_figures->topLevelItemCount() > 0
        && m_figures->topLevelItem(0)->childCount() > 0) {
        select = m_figures->topLevelItem(0)->child(0);
    }
    if (select != nullptr) {
        m_figures->setCurrentItem(select);
    }
    showSelectedFigure();
}

void MemoryPanel::showSelectedFigure()
{
    const QTreeWidgetItem* item = m_figures->currentItem();
    m_figureDetails->setPlainText(
        item != nullptr ? item->data(1, Qt::UserRole).toString() : QString());
}

QString MemoryPanel::figureDetails() const { return m_figureDetails->toPlainText(); }

void MemoryPanel::showStages(const plan::MemoryReport& r)
{
    auto stages = r.perRank;
    std::sort(stages.begin(), stages.end(),
        [](const auto& a, const auto& b) { return a.ppStage < b.ppStage; });
    QStringList categories;
    struct Part {
        QString name;
        MemoryColor color;
        Bytes plan::RankMemory::*field;
    };
    const Part parts[] = { { tr("weights"), MemoryColor::Weights, &plan::RankMemory::weights },
        { tr("gradients"), MemoryColor::Gradients, &plan::RankMemory::gradients },
        { tr("optimizer"), MemoryColor::Optimizer, &plan::RankMemory::optimizer },
        { tr("activations"), MemoryColor::Activations, &plan::RankMemory::activations },
        { tr("KV cache"), MemoryColor::KvCache, &plan::RankMemory::kvCache },
        { tr("buffers"), MemoryColor::Buffers, &plan::RankMemory::buffers } };
    // The KV cache itemised by layer kind (attention, sliding, latent, recurrent states...).
    std::vector<model::MixerKind> kinds;
    for (const auto& s : stages) {
        for (const auto& k : s.kvByKind) {
            if (std::find(kinds.begin(), kinds.end(), k.kind) == kinds.end()) {
                kinds.push_back(k.kind);
            }
        }
    }
    QVector<BarLayer> layers;
    for (const auto& part : parts) {
        if (part.field == &plan::RankMemory::kvCache && kinds.size() > 1) {
            for (std::size_t i = 0; i < kinds.size(); ++i) {
                BarLayer layer { tr("KV cache · %1").arg(toQString(model::mixerKindName(kinds[i]))),
                    memoryColor(MemoryColor::KvCache).darker(100 + int(i) * 35), {} };
                for (const auto& s : stages) {
                    double bytes = 0;
                    for (const auto& k : s.kvByKind) {
                        bytes += k.kind == kinds[i] ? double(k.bytes.value) : 0.0;
                    }
                    layer.values << bytes;
                }
                layers << layer;
            }
            continue;
        }
        BarLayer layer { part.name, memoryColor(part.color), {} };
        bool any = false;
        for (const auto& s : stages) {
            layer.values << double((s.*part.field).value);
            any = any || (s.*part.field).value != 0;
        }
        if (any) {
            layers << layer;
        }
    }
    for (const auto& s : stages) {
        categories << (stages.size() <= 8 ? tr("%1\nr%2").arg(s.ppStage).arg(s.rank)
                                          : QString::number(s.ppStage));
    }
    m_stageChart->clear();
    m_stageChart->setTitle(tr("Memory per pipeline stage (first rank of each stage)"));
    m_stageChart->setStackedBars(categories, layers);
    m_stageChart->setByteAxis(PlotWidget::Axis::Y);
    m_stageChart->setAxisLabel(PlotWidget::Axis::X, tr("pipeline stage / rank"));
    m_stageChart->addHorizontalLine({ double(r.deviceMemory.value),
        tr("%1 · %2").arg(toQString(m_session.cluster().device.name), bytesText(r.deviceMemory)),
        errorColor() });
    m_stageChart->rescaleAndReplot();
}

void MemoryPanel::showSweep(const std::vector<SweepPoint>& sweep, double deviceMemory)
{
    const bool train = m_session.workload().mode == plan::Mode::Train;
    PlotSeries total { tr("total"), categoricalColor(0), {}, {}, false, true, 6, true, {} };
    PlotSeries activations { train ? tr("activations") : tr("prefill workspace"),
        memoryColor(MemoryColor::Activations), {}, {}, false, true, 5, true, {} };
    PlotSeries kv { tr("KV cache"), memoryColor(MemoryColor::KvCache), {}, {}, false, true, 5, true,
        {} };
    for (const auto& p : sweep) {
        total.x << p.length;
        total.y << double(p.peak.total.value);
        activations.x << p.length;
        activations.y << double(p.peak.activations.value);
        kv.x << p.length;
        kv.y << double(p.peak.kvCache.value);
    }
    m_sweepChart->clear();
    m_sweepChart->setTitle(train ? tr("Most loaded rank against sequence length")
                                 : tr("Most loaded rank against context length"));
    QVector<PlotSeries> series { total, activations };
    if (!train) {
        series << kv;
    }
    m_sweepChart->setLineSeries(series);
    m_sweepChart->setLogScale(PlotWidget::Axis::X, true);
    m_sweepChart->setAxisFormat(PlotWidget::Axis::X, AxisFormat::Count);
    m_sweepChart->setAxisLabel(
        PlotWidget::Axis::X, train ? tr("tokens per sequence") : tr("tokens in context"));
    m_sweepChart->setByteAxis(PlotWidget::Axis::Y);
    m_sweepChart->addHorizontalLine({ deviceMemory, tr("device memory"), errorColor() });
    const auto& w = m_session.workload();
    m_sweepChart->addVerticalLine({ double(train ? w.seqLength : w.context), tr("current"),
        palette().color(QPalette::PlaceholderText) });
    m_sweepChart->rescaleAndReplot();
}

} // namespace day0::ui
