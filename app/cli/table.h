#pragma once

#include <string>
#include <vector>

namespace day0::cli {

/// A plain-text table for terminals: a header row, aligned columns, optional right alignment.
class Table {
public:
    enum class Align { Left, Right };

    explicit Table(std::vector<std::string> header, std::vector<Align> align = {});
    void addRow(std::vector<std::string> cells);
    /// Adds a horizontal rule before the next row.
    void addSeparator();
    [[nodiscard]] std::string render() const;

private:
    std::vector<std::string> m_header;
    std::vector<Align> m_align;
    std::vector<std::vector<std::string>> m_rows; // an empty row is a separator
};

/// Display width of UTF-8 text (code points; our tables hold no wide characters).
std::size_t displayWidth(const std::string& text);

} // namespace day0::cli
