#include "widgets/key_columns.h"

#include <QAbstractItemView>
#include <QEvent>
#include <QHeaderView>
#include <QPointer>
#include <QTableView>
#include <QTimer>
#include <QTreeView>

#include <algorithm>
#include <numeric>

namespace day0::ui {

namespace {

constexpr char kProperty[] = "day0KeyColumns";
constexpr char kFitterName[] = "day0KeyColumnFitter";
constexpr int kNarrowest = 48; // pixels: the name column never goes below this
constexpr int kWidestOther = 320; // pixels: a non-key column sized to contents stops here

QHeaderView* headerOf(QAbstractItemView& view)
{
    if (auto* table = qobject_cast<QTableView*>(&view)) {
        return table->horizontalHeader();
    }
    if (auto* tree = qobject_cast<QTreeView*>(&view)) {
        return tree->header();
    }
    return nullptr;
}

// Refits the view's columns on resize and on model changes, once per event-loop turn.
class KeyColumnFitter : public QObject {
public:
    KeyColumnFitter(QAbstractItemView& view, QList<int> columns, int elastic)
        : QObject(&view)
        , m_view(&view)
        , m_columns(std::move(columns))
        , m_elastic(elastic)
    {
        setObjectName(QLatin1String(kFitterName));
        view.viewport()->installEventFilter(this);
        QHeaderView* header = headerOf(view);
        connect(header, &QHeaderView::sectionCountChanged, this, &KeyColumnFitter::schedule);
        watchModel();
        schedule();
    }

    bool eventFilter(QObject* watched, QEvent* event) override
    {
        if (event->type() == QEvent::Resize || event->type() == QEvent::Show) {
            schedule();
        }
        return QObject::eventFilter(watched, event);
    }

    void schedule()
    {
        watchModel();
        if (!m_scheduled) {
            m_scheduled = true;
            QTimer::singleShot(0, this, [this] {
                m_scheduled = false;
                fit();
            });
        }
    }

private:
    void watchModel()
    {
        QAbstractItemModel* model = m_view->model();
        if (model == m_model) {
            return;
        }
        if (m_model) {
            disconnect(m_model, nullptr, this, nullptr);
        }
        m_model = model;
        if (model) {
            connect(model, &QAbstractItemModel::modelReset, this, &KeyColumnFitter::schedule);
            connect(model, &QAbstractItemModel::layoutChanged, this, &KeyColumnFitter::schedule);
            connect(model, &QAbstractItemModel::rowsInserted, this, &KeyColumnFitter::schedule);
            connect(model, &QAbstractItemModel::dataChanged, this, &KeyColumnFitter::schedule);
        }
    }

    void fit()
    {
        QHeaderView* header = headerOf(*m_view);
        const int count = header->count();
        QList<int> keys;
        for (const int c : m_columns) {
            // A column the panel hides (B of a single run) stays hidden.
            if (c >= 0 && c < count && !keys.contains(c) && !header->isSectionHidden(c)) {
                keys << c;
            }
        }
        if (keys.isEmpty()) {
            return;
        }
        header->setStretchLastSection(false);
        for (int i = 0; i < keys.size(); ++i) {
            if (header->visualIndex(keys[i]) != i) {
                header->moveSection(header->visualIndex(keys[i]), i);
            }
        }
        const QAbstractItemView* view = m_view;
        auto wanted = [&](int c) {
            return std::max(header->sectionSizeHint(c), view->sizeHintForColumn(c));
        };
        const int room = m_view->viewport()->width();
        std::vector<int> widths(count, 0);
        int others = 0;
        for (int c = 0; c < count; ++c) {
            widths[c] = keys.contains(c) ? wanted(c) : std::min(wanted(c), kWidestOther);
            if (header->isSectionHidden(c)) {
                continue;
            }
            if (!keys.contains(c) && !header->isSectionHidden(c)) {
                others += widths[c];
            }
        }
        int keyTotal = 0;
        for (const int c : keys) {
            keyTotal += widths[c];
        }
        const int first = keys.contains(m_elastic) ? m_elastic : keys.front();
        if (keyTotal > room) {
            // The name gives way first (its text is elided), then every key column alike.
            widths[first] = std::max(kNarrowest, widths[first] - (keyTotal - room));
            keyTotal = std::accumulate(
                keys.begin(), keys.end(), 0, [&](int sum, int c) { return sum + widths[c]; });
            if (keyTotal > room) {
                // Then the widest are cut to a common cap (a long model path, say), so that
                // narrow columns (ids, status) stay whole.
                std::vector<int> sorted;
                for (const int c : keys) {
                    sorted.push_back(widths[c]);
                }
                std::sort(sorted.begin(), sorted.end());
                int cap = sorted.back();
                int rest = room;
                for (std::size_t i = 0; i < sorted.size(); ++i) {
                    const int share = rest / int(sorted.size() - i);
                    if (sorted[i] > share) {
                        cap = share;
                        break;
                    }
                    rest -= sorted[i];
                }
                for (const int c : keys) {
                    widths[c] = std::min(widths[c], std::max(16, cap));
                }
            }
        } else if (keyTotal + others < room) {
            // Room to spare: the name takes it, as a stretching first column would.
            widths[first] += room - keyTotal - others;
        }
        for (int c = 0; c < count; ++c) {
            header->setSectionResizeMode(c, QHeaderView::Interactive);
            if (!header->isSectionHidden(c)) {
                header->resizeSection(c, widths[c]);
            }
        }
    }

    QPointer<QAbstractItemView> m_view;
    QPointer<QAbstractItemModel> m_model;
    QList<int> m_columns;
    int m_elastic = -1;
    bool m_scheduled = false;
};

} // namespace

void setKeyColumns(QAbstractItemView& view, const QList<int>& columns, int elastic)
{
    if (headerOf(view) == nullptr) {
        return;
    }
    QVariantList list;
    for (const int c : columns) {
        list << c;
    }
    view.setProperty(kProperty, list);
    delete view.findChild<QObject*>(QLatin1String(kFitterName), Qt::FindDirectChildrenOnly);
    new KeyColumnFitter(view, columns, elastic);
}

QList<int> keyColumns(const QAbstractItemView& view)
{
    QList<int> columns;
    for (const QVariant& c : view.property(kProperty).toList()) {
        columns << c.toInt();
    }
    return columns;
}

} // namespace day0::ui
