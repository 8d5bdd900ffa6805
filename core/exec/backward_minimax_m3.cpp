// What the gradient pass (gradient_pass.h) adds for MiniMax-M3's text decoder. Its (1 + w)
// RMSNorms are the zero-centred norms (init adds the 1, exec/forward.h zeroCentredNorm), its
// per-head q/k norms, partial rotary and GQA the standard attention's (backward_layer.cpp), its
// dense/MoE split, sigmoid router with correction bias and routed_scaling_factor, shared expert
// and swigluoai (gpt-oss's clamped SwiGLU) the standard feed-forward's (backward_ffn.cpp). Here
// is MiniMax Sparse Attention's block selection on the sparse_attention_freq layers: the index
// branch (index_q_proj / index_k_proj, their (1 + w) norms per head, the rotation of q and k)
// scores the key blocks and keeps, per query and KV group, the blocks selectKeyBlocks keeps
// (msa.h, as Forward::blockSparseAttention); each group's heads then attend causally inside
// them. The selection is an integer top-k: in autograd (the twin
// plugins/torch/day0_torch_minimax_m3.py builds a boolean mask from it) no gradient reaches the
// index branch, whose weights keep zero gradients, and the attention's backward over the kept
// keys is that of its probabilities (zero where dropped).
#include "exec/backward_ops.h"
#include "exec/forward.h"
#include "exec/gradient_pass.h"
#include "exec/msa.h"

#include <fmt/format.h>

namespace day0::exec::detail {

using numerics::Tensor;

template <typename T>
void GradientPass<T>::msaSelect(int l, LayerActivations<T>& a, AttentionMask<T>& mask)
{
    const model::BlockSparseSpec& bs = *m_spec.blockSparse;
    const std::int64_t n = std::int64_t(m_positions.size());
    const std::int64_t h = m_spec.hiddenSize;
    const std::int64_t ih = bs.indexHeads;
    const std::int64_t id = bs.indexDim;
    const std::string p = attn(l);
    // The index queries and the one index key per token, from the same normed input as q/k/v,
    // normed per head and rotated like q and k.
    std::vector<T> iq(std::size_t(n * ih * id));
    std::vector<T> ik(std::size_t(n * id));
    project(a.xn1.data(), m_p.value(p + ".index_q_proj.weight"), nullptr, iq.data(), n, h, ih * id);
    project(a.xn1.data(), m_p.value(p + ".index_k_proj.weight"), nullptr, ik.data(), n, h, id);
    norm(iq.data(), m_p.value(p + ".index_q_norm.weight"), iq.data(), n * ih, id);
    norm(ik.data(), m_p.value(p + ".index_k_norm.weight"), ik.data(), n, id);
    rotate(iq.data(), ih, id);
    rotate(ik.data(), 1, id);
    const BlockSelectionShape shape = blockSelectionShape(bs, n, n);
    const auto blocks = selectKeyBlocks<T>(iq.data(), ik.data(), shape);
    m_routing.emplace_back(
        p + ".indexer#topk", Tensor::fromInts({ n * ih, bs.topKBlocks }, blocks));
    // Index head g serves KV group g (blockSparseInit and backwardUnsupported: as many index
    // heads as KV heads).
    const std::int64_t width = bs.topKBlocks * bs.blockSize;
    a.selection.assign(std::size_t(ih * n * width), -1);
    for (std::int64_t g = 0; g < ih; ++g) {
        const auto keys = keysOfBlocks(blocks, shape, g);
        std::copy(keys.begin(), keys.end(), a.selection.begin() + g * n * width);
    }
    mask.selected = a.selection;
    mask.selectedPerQuery = width;
    mask.selectedPerKvHead = true;
}

template void GradientPass<float>::msaSelect(int, LayerActivations<float>&, AttentionMask<float>&);
template void GradientPass<double>::msaSelect(
    int, LayerActivations<double>&, AttentionMask<double>&);

} // namespace day0::exec::detail
