#include "table.h"

#include <algorithm>

namespace day0::cli {

std::size_t displayWidth(const std::string& text)
{
    std::size_t width = 0;
    for (const unsigned char c : text) {
        if ((c & 0xC0) != 0x80) {
            ++width;
        }
    }
    return width;
}

Table::Table(std::vector<std::string> header, std::vector<Align> align)
    : m_header(std::move(header))
    , m_align(std::move(align))
{
    m_align.resize(m_header.size(), Align::Left);
}

void Table::addRow(std::vector<std::string> cells)
{
    cells.resize(m_header.size());
    m_rows.push_back(std::move(cells));
}

void Table::addSeparator() { m_rows.emplace_back(); }

std::string Table::render() const
{
    std::vector<std::size_t> widths(m_header.size());
    for (std::size_t c = 0; c < m_header.size(); ++c) {
        widths[c] = displayWidth(m_header[c]);
        for (const auto& row : m_rows) {
            if (!row.empty()) {
                widths[c] = std::max(widths[c], displayWidth(row[c]));
            }
        }
    }
    auto line = [&](const std::vector<std::string>& cells) {
        std::string out;
        for (std::size_t c = 0; c < cells.size(); ++c) {
            const auto pad = std::string(widths[c] - displayWidth(cells[c]), ' ');
            const bool last = c + 1 == cells.size();
            if (m_align[c] == Align::Right) {
                out += pad + cells[c];
            } else {
                out += cells[c] + (last ? std::string() : pad);
            }
            if (!last) {
                out += "  ";
            }
        }
        return out + "\n";
    };
    auto rule = [&] {
        std::size_t total = 0;
        for (const auto w : widths) {
            total += w;
        }
        total += widths.empty() ? 0 : 2 * (widths.size() - 1);
        return std::string(total, '-') + "\n";
    };
    std::string out = line(m_header) + rule();
    for (const auto& row : m_rows) {
        out += row.empty() ? rule() : line(row);
    }
    return out;
}

} // namespace day0::cli
