#pragma once

#include <string>
#include <vector>

namespace day0::test {

/// The test cases of a JUnit XML document read with a real XML parser (Qt's QXmlStreamReader
/// when the GUI is built, else a strict well-formedness scan of the tags).
struct JUnitCases {
    std::vector<std::string> names;
    int failures = 0;
    int errors = 0;
    int skipped = 0;
    std::string error; ///< why the document does not parse; empty when it does
    explicit operator bool() const { return error.empty(); }
};

/// Parses `xml`.
JUnitCases junitTestcases(const std::string& xml);

/// True when day0 draws the HTML report's figures (built with the GUI library).
extern const bool kCliHasPlots;

} // namespace day0::test
