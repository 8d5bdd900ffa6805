#pragma once

#include "base/result.h"
#include "pipeline/report.h"

#include <functional>
#include <string>
#include <vector>

namespace day0::pipeline {

/// How a figure's axis prints its ticks (the GUI's formats: bytes, durations, plain numbers).
enum class FigureAxis { Number, Bytes, Duration };

/// One line of a line chart, or one layer of a bar chart (then `x` is unused and `y` holds one
/// value per category).
struct FigureSeries {
    std::string name;
    std::vector<double> x;
    std::vector<double> y;
    bool dashed = false;
};

/// A plot described in plain data, so core can ask for it without knowing how it is drawn: the
/// front end renders it with the workbench's own plotting code (ui's PlotWidget).
struct FigureSpec {
    enum class Kind { Lines, Bars };
    Kind kind = Kind::Lines;
    std::string title;
    std::string xLabel;
    std::string yLabel;
    FigureAxis yFormat = FigureAxis::Number;
    bool logY = false;
    std::vector<std::string> categories; ///< bar charts: one label per category
    std::vector<FigureSeries> series;
};

/// Turns a figure description into an image for the HTML report. Called on the thread that
/// writes the report; an implementation that needs a GUI thread must marshal itself.
using FigureRenderer = std::function<Result<ReportFigure>(const FigureSpec&)>;

} // namespace day0::pipeline
