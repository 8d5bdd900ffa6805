#include "junit_check.h"

#include <QString>
#include <QXmlStreamReader>

namespace day0::test {

const bool kCliHasPlots = true;

JUnitCases junitTestcases(const std::string& xml)
{
    JUnitCases out;
    QXmlStreamReader reader(QByteArray::fromStdString(xml));
    while (!reader.atEnd()) {
        if (reader.readNext() != QXmlStreamReader::StartElement) {
            continue;
        }
        const auto name = reader.name();
        if (name == QLatin1String("testcase")) {
            out.names.push_back(
                reader.attributes().value(QLatin1String("name")).toString().toStdString());
        } else if (name == QLatin1String("failure")) {
            ++out.failures;
        } else if (name == QLatin1String("error")) {
            ++out.errors;
        } else if (name == QLatin1String("skipped")) {
            ++out.skipped;
        }
    }
    if (reader.hasError()) {
        out.error = reader.errorString().toStdString();
    }
    return out;
}

} // namespace day0::test
