// Without Qt: a strict scan that checks every tag is closed in order and counts test cases.
#include "junit_check.h"

#include <regex>

namespace day0::test {

const bool kCliHasPlots = false;

JUnitCases junitTestcases(const std::string& xml)
{
    JUnitCases out;
    std::vector<std::string> open;
    const std::regex tag(R"(<(/?)([A-Za-z_][\w.-]*)([^<>]*?)(/?)>)");
    const std::regex nameAttr(R"re(\bname="([^"]*)")re");
    for (auto it = std::sregex_iterator(xml.begin(), xml.end(), tag); it != std::sregex_iterator();
         ++it) {
        const auto& m = *it;
        const std::string name = m[2];
        if (m[1].length() > 0) {
            if (open.empty() || open.back() != name) {
                out.error = "unbalanced </" + name + ">";
                return out;
            }
            open.pop_back();
            continue;
        }
        if (name == "testcase") {
            std::smatch n;
            const std::string attrs = m[3];
            out.names.push_back(std::regex_search(attrs, n, nameAttr) ? n[1].str() : "");
        }
        out.failures += name == "failure";
        out.errors += name == "error";
        out.skipped += name == "skipped";
        if (m[4].length() == 0) {
            open.push_back(name);
        }
    }
    if (!open.empty()) {
        out.error = "<" + open.back() + "> is never closed";
    }
    return out;
}

} // namespace day0::test
