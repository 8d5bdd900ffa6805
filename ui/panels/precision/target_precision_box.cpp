// The target precisions of the precision panel's views (layer by layer, end to end).
#include "panels/precision/target_precision_box.h"

#include <QComboBox>

namespace day0::ui {

QComboBox* createTargetPrecisionBox(QWidget* parent)
{
    auto* box = new QComboBox(parent);
    using exec::Fp8Scaling;
    using exec::PrecisionMode;
    const struct {
        const char* label;
        PrecisionMode mode;
        Fp8Scaling scaling;
    } targets[] = {
        { "bf16", PrecisionMode::BF16, Fp8Scaling::PerTensor },
        { "fp16", PrecisionMode::F16, Fp8Scaling::PerTensor },
        { "fp8-e4m3", PrecisionMode::F8E4M3, Fp8Scaling::PerTensor },
        { "fp8-e4m3 per channel", PrecisionMode::F8E4M3, Fp8Scaling::Channel },
        { "fp8-e4m3 block", PrecisionMode::F8E4M3, Fp8Scaling::Block },
        { "int8", PrecisionMode::Int8, Fp8Scaling::PerTensor },
        { "nvfp4", PrecisionMode::Nvfp4, Fp8Scaling::PerTensor },
        { "mxfp4", PrecisionMode::Mxfp4, Fp8Scaling::PerTensor },
        { "int4", PrecisionMode::Int4G128, Fp8Scaling::PerTensor },
        { "int4-g32", PrecisionMode::Int4G32, Fp8Scaling::PerTensor },
        // Last: against the fp64 reference it measures a backend's own kernels.
        { "fp32", PrecisionMode::F32, Fp8Scaling::PerTensor },
    };
    for (const auto& t : targets) {
        box->addItem(QString::fromLatin1(t.label), int(t.mode) | (int(t.scaling) << 8));
    }
    box->setToolTip(QComboBox::tr("Emulated target precision (fp8, int8, nvfp4, mxfp4 and int4 "
                                  "quantise the projections; the run's recipe says what is "
                                  "rounded where)"));
    return box;
}

exec::PrecisionPlan targetPrecisionOf(const QComboBox& box)
{
    const int packed = box.currentData().toInt();
    exec::PrecisionPlan plan;
    plan.base = exec::PrecisionMode(packed & 0xFF);
    plan.fp8Scaling = exec::Fp8Scaling(packed >> 8);
    return plan;
}

} // namespace day0::ui
