#pragma once

#include <QList>

class QAbstractItemView;

namespace day0::ui {

/// Declares the columns of a table or tree view that a reader needs (what a row is, and the
/// figures it is read for) and keeps them in view without horizontal scrolling at any width:
/// they come first, in the order given, sized to their contents; when they do not all fit, the
/// `elastic` column (the name; by default the first given) is narrowed and its text elided, and
/// it takes any room to spare. The other columns follow and may scroll. Refits on resize and
/// whenever the model changes. GUI thread.
void setKeyColumns(QAbstractItemView& view, const QList<int>& columns, int elastic = -1);
/// The columns setKeyColumns declared; empty when none were.
[[nodiscard]] QList<int> keyColumns(const QAbstractItemView& view);

} // namespace day0::ui
