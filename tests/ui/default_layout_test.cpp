// The default docked layout as a user first sees it, at 1920×1080 and at 1280×720, for the
// embedded demo and for a model opened from a long folder path: the window fits the screen, no
// label is cut without its full text in a tooltip, no plot's tick labels overlap, no plot
// shows placeholder axes, titles are whole, and every table's key columns are in view.
#include "base/resources.h"
#include "panels/builtin_panels.h"
#include "settings/ui_state_store.h"
#include "shell/main_window.h"
#include "shell/panel_registry.h"
#include "ui_test_support.h"
#include "widgets/elided_label.h"
#include "widgets/key_columns.h"
#include "widgets/plot_widget.h"

#include <QAbstractItemView>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFontMetrics>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>
#include <QSettings>
#include <QTableView>
#include <QTreeView>

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace day0;
using namespace day0::ui;

namespace {

// Where each tick label lies, from the axis' tick positions and the label font's metrics, and
// whether two neighbours share pixels. Independent of PlotWidget's own fitting.
QStringList overlappingTicks(const TickLabels& t)
{
    const QFontMetrics metrics(t.font);
    // An empty label (a log axis' unlabelled tick) draws nothing.
    std::vector<int> order;
    for (int i = 0; i < t.positions.size(); ++i) {
        if (!t.labels[i].trimmed().isEmpty()) {
            order.push_back(i);
        }
    }
    std::sort(
        order.begin(), order.end(), [&](int a, int b) { return t.positions[a] < t.positions[b]; });
    QStringList clashes;
    const double angle = std::abs(t.rotation) * M_PI / 180.0;
    for (size_t i = 1; i < order.size(); ++i) {
        const int a = order[i - 1];
        const int b = order[i];
        const QRect ra = metrics.boundingRect(QRect(), Qt::AlignCenter, t.labels[a]);
        const QRect rb = metrics.boundingRect(QRect(), Qt::AlignCenter, t.labels[b]);
        const double gap = t.positions[b] - t.positions[a];
        bool clash = false;
        if (t.orientation == Qt::Vertical) {
            clash = gap < (ra.height() + rb.height()) / 2.0;
        } else if (angle == 0.0) {
            clash = gap < (ra.width() + rb.width()) / 2.0;
        } else {
            // Turned labels are parallel strips one line high, gap × sin(angle) apart.
            clash = gap * std::sin(angle) < std::max(ra.height(), rb.height());
        }
        if (clash) {
            clashes << t.labels[a] + QStringLiteral(" / ") + t.labels[b];
        }
    }
    return clashes;
}

QString nameOf(const QWidget* w)
{
    QStringList path;
    for (; w != nullptr; w = w->parentWidget()) {
        if (!w->objectName().isEmpty()) {
            path.prepend(w->objectName());
        }
    }
    return path.join(QLatin1Char('/'));
}

// What holds a widget's minimum width (or height) up: the chain of its largest children.
QString widestChain(const QWidget* w, bool height = false)
{
    auto extent = [height](const QWidget* x) {
        return height ? x->minimumSizeHint().height() : x->minimumSizeHint().width();
    };
    QStringList chain;
    while (w != nullptr) {
        chain << QStringLiteral("%1 %2px").arg(w->objectName().isEmpty()
                ? QString::fromLatin1(w->metaObject()->className())
                : w->objectName(),
            QString::number(extent(w)));
        const QWidget* widest = nullptr;
        for (const auto* child : w->findChildren<QWidget*>(Qt::FindDirectChildrenOnly)) {
            if (child->isVisibleTo(w) && !child->isWindow()
                && (!widest || extent(child) > extent(widest))) {
                widest = child;
            }
        }
        w = widest;
    }
    return chain.join(QStringLiteral(" > "));
}

// Every problem the visible part of `root` shows; empty when it fits.
QStringList layoutProblems(QWidget& root)
{
    QStringList problems;
    for (auto* label : root.findChildren<QLabel*>()) {
        if (!label->isVisible() || label->text().isEmpty()) {
            continue;
        }
        if (auto* elided = qobject_cast<ElidedLabel*>(label)) {
            if (elided->isElided() && elided->toolTip() != elided->fullText()) {
                problems << QStringLiteral("%1: elided without its text in the tooltip")
                                .arg(nameOf(label));
            }
            continue;
        }
        if (!label->wordWrap() && label->sizeHint().width() > label->width() + 1
            && label->toolTip().isEmpty()) {
            problems << QStringLiteral("%1: '%2' cut to %3 of %4 px")
                            .arg(nameOf(label), label->text().left(60))
                            .arg(label->width())
                            .arg(label->sizeHint().width());
        }
    }
    for (auto* plot : root.findChildren<PlotWidget*>()) {
        if (!plot->isVisible() || plot->width() < 50 || plot->height() < 50) {
            continue;
        }
        if (plot->showsEmptyState()) {
            if (plot->noteText().isEmpty()) {
                problems << QStringLiteral("%1: empty without a note").arg(nameOf(plot));
            }
            continue;
        }
        for (const auto axis : { PlotWidget::Axis::X, PlotWidget::Axis::Y }) {
            const QStringList clashes = overlappingTicks(plot->tickLabels(axis));
            if (!clashes.isEmpty()) {
                problems << QStringLiteral("%1: tick labels overlap: %2")
                                .arg(nameOf(plot), clashes.join(QStringLiteral("; ")));
            }
        }
        // Axis titles wrap to their axis, never run past it.
        for (const auto axis : { PlotWidget::Axis::X, PlotWidget::Axis::Y }) {
            const int length = plot->axisLength(axis);
            for (const QString& line : plot->axisLabelLines(axis)) {
                if (QFontMetrics(plot->font()).horizontalAdvance(line) > length + 2) {
                    problems << QStringLiteral("%1: axis title '%2' longer than its axis (%3 px)")
                                    .arg(nameOf(plot), line)
                                    .arg(length);
                }
            }
        }
        QFont bold = plot->font();
        bold.setBold(true);
        for (const QString& line : plot->titleLines()) {
            if (QFontMetrics(bold).horizontalAdvance(line) > plot->width()) {
                problems << QStringLiteral("%1: title '%2' cut").arg(nameOf(plot), line);
            }
        }
    }
    for (auto* view : root.findChildren<QAbstractItemView*>()) {
        auto* table = qobject_cast<QTableView*>(view);
        auto* tree = qobject_cast<QTreeView*>(view);
        if (!view->isVisible() || (!table && !tree) || !view->model()
            || view->model()->columnCount() < 2 || view->viewport()->width() < 40) {
            continue;
        }
        const QList<int> keys = keyColumns(*view);
        if (keys.isEmpty()) {
            problems << QStringLiteral("%1: declares no key columns").arg(nameOf(view));
            continue;
        }
        QHeaderView* header = table ? table->horizontalHeader() : tree->header();
        for (const int c : keys) {
            if (header->isSectionHidden(c)) {
                continue; // not shown for this content (B of a single run)
            }
            const int left = header->sectionViewportPosition(c);
            const int right = left + header->sectionSize(c);
            const QString name = view->model()->headerData(c, Qt::Horizontal).toString();
            // A key column's header is read whole (the name column's may be elided with it).
            const int text = QFontMetrics(header->font()).horizontalAdvance(name);
            if (c != keys.front() && header->sectionSize(c) < text + 6) {
                problems << QStringLiteral("%1: header '%2' cut to %3 px of %4")
                                .arg(nameOf(view), name)
                                .arg(header->sectionSize(c))
                                .arg(text + 6);
            }
            if (left < 0 || right > view->viewport()->width() + 1
                || header->sectionSize(c) < header->sectionSizeHint(c) / 2) {
                problems << QStringLiteral("%1: key column '%2' at %3–%4 of %5 px")
                                .arg(nameOf(view), name)
                                .arg(left)
                                .arg(right)
                                .arg(view->viewport()->width());
            }
        }
    }
    return problems;
}

// A copy of a bundled config under a long folder path, as a user's download might sit.
QString longFolderModel(const QTemporaryDir& dir)
{
    const QString folder = dir.filePath(QStringLiteral(
        "models/downloads/huggingface/hub/checkpoints-for-day-zero-bring-up/"
        "Qwen3-30B-A3B-Instruct-2507-release-candidate-with-a-very-long-folder-name"));
    EXPECT_TRUE(QDir().mkpath(folder));
    const QString source
        = QString::fromStdString((resourceDir() / "configs" / "qwen3-30b-a3b.json").string());
    EXPECT_TRUE(QFile::copy(source, QDir(folder).filePath(QStringLiteral("config.json"))))
        << source.toStdString();
    return folder;
}

struct LayoutCase {
    QSize screen;
    bool longPath;
};

class DefaultLayout : public ::testing::TestWithParam<LayoutCase> { };

} // namespace

TEST_P(DefaultLayout, FitsTheScreenWithNothingCutOrOverlapping)
{
    const LayoutCase c = GetParam();
    test::ScratchStore store;
    test::ScopedCache cache;
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    PanelRegistry registry;
    registerBuiltinPanels(registry);
    Session session;
    JobRunner jobs;
    // The embedded default, as day0-workbench opens it with no arguments.
    test::configure(
        session, "h200:32x8", plan::Mode::Train, "tp=8,pp=8,ep=32,etp=1,zero=1,recompute=full");
    // With no model argument the timeline traces a demo run when it is first shown.
    session.setDemo(!c.longPath);
    MainWindow window(registry, session, jobs, settings);
    const QRect screen(QPoint(0, 0), c.screen);
    window.setGeometry(UiStateStore::fitToScreen(QRect(0, 0, 1600, 1000), screen));
    window.openModel(c.longPath ? longFolderModel(dir) : QStringLiteral("kimi-k2"));
    window.show();
    test::settle(jobs);

    EXPECT_LE(window.minimumSizeHint().width(), c.screen.width()) << [&] {
        std::string docks;
        for (const auto& panel : registry.panels()) {
            docks += "\n  " + widestChain(window.panel(panel.id)).toStdString();
        }
        return docks;
    }();
    EXPECT_LE(window.width(), c.screen.width());
    EXPECT_LE(window.height(), c.screen.height()) << [&] {
        std::string docks;
        for (const auto& panel : registry.panels()) {
            docks += "\n  " + widestChain(window.panel(panel.id), true).toStdString();
        }
        return docks;
    }();
    for (const auto& panel : registry.panels()) {
        window.raisePanel(panel.id);
        test::settle(jobs);
        EXPECT_LE(window.width(), c.screen.width()) << panel.id.toStdString();
        QWidget* dock = window.panel(panel.id)->parentWidget();
        const QStringList problems = layoutProblems(*dock);
        EXPECT_TRUE(problems.isEmpty())
            << c.screen.width() << "x" << c.screen.height() << " " << panel.id.toStdString()
            << ":\n  " << problems.join(QStringLiteral("\n  ")).toStdString();
    }
}

INSTANTIATE_TEST_SUITE_P(Screens, DefaultLayout,
    ::testing::Values(LayoutCase { QSize(1920, 1080), false },
        LayoutCase { QSize(1280, 720), false }, LayoutCase { QSize(1920, 1080), true },
        LayoutCase { QSize(1280, 720), true }),
    [](const ::testing::TestParamInfo<LayoutCase>& param) {
        return std::to_string(param.param.screen.width()) + "x"
            + std::to_string(param.param.screen.height())
            + (param.param.longPath ? "_LongPath" : "_Demo");
    });

TEST(DefaultLayout, SavedGeometryIsFittedToTheScreen)
{
    const QRect laptop(0, 0, 1280, 720);
    // Saved on a 2560-wide monitor at its right edge: moved and shrunk to the laptop's screen.
    EXPECT_EQ(UiStateStore::fitToScreen(QRect(1200, 300, 2005, 1200), laptop), laptop);
    EXPECT_EQ(
        UiStateStore::fitToScreen(QRect(900, 100, 800, 600), laptop), QRect(480, 100, 800, 600));
    // A window that fits stays where it is.
    EXPECT_EQ(UiStateStore::fitToScreen(QRect(10, 20, 800, 600), laptop), QRect(10, 20, 800, 600));
    // A screen with an offset origin (a second monitor, a panel on the left).
    EXPECT_EQ(UiStateStore::fitToScreen(QRect(0, 0, 1000, 500), QRect(1920, 40, 1280, 680)),
        QRect(1920, 40, 1000, 500));
}

TEST(DefaultLayout, ElidedLabelKeepsItsFullTextInTheTooltip)
{
    ElidedLabel label;
    const QString path = QStringLiteral("runs checkpoint /a/very/long/folder/path/that/does/not/"
                                        "fit/in/the/room/the/label/has/Qwen3-30B-A3B/config.json");
    label.setFullText(path);
    EXPECT_LT(label.minimumSizeHint().width(), 100) << "a long text must not widen the window";
    label.resize(200, label.sizeHint().height());
    label.show();
    EXPECT_TRUE(label.isElided());
    EXPECT_TRUE(label.text().contains(QChar(0x2026)));
    EXPECT_EQ(label.toolTip(), path);
    label.resize(label.sizeHint().width() + 10, label.sizeHint().height());
    EXPECT_FALSE(label.isElided());
    EXPECT_EQ(label.text(), path);
    EXPECT_TRUE(label.toolTip().isEmpty());
}
