// ConvTranspose: a GEMM (oneDNN sgemm) per image and group followed by a col2im scatter, which
// covers every output_padding / output_shape combination, split over the output channels. When
// the windows tile the output (strides equal to the kernel, no dilation or padding, no output
// padding: U-Net's 2x2 / 2 upsampling), every output takes exactly one tap, so it is written once
// as bias + column instead of filled and added into. With at least as many products (images x
// groups) as threads, each thread runs whole products on one thread (ForEachProductRange).
// A 2-D one of one group with constant weights also runs on oneDNN's deconvolution, and the
// faster by timed runs runs (FasterOf). The fused form (kFusedConvTransposeOp) applies its
// activation to each output channel's plane right after the scatter writes it, or to oneDNN's
// output after the primitive, with the bias: oneDNN 2.6's deconvolution ran several times
// slower with an eltwise post-op than without, and slower with a bias (ONEDNN_VERBOSE, one
// thread, 128 -> 64 channels 4x4 / 2 over 16x16: 0.41 ms bare, 2.76 ms with a Relu post-op,
// 0.58 ms with a bias; 512 -> 256 over 4x4: 0.75 ms bare, 0.90-1.04 ms with a bias).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/faster_way.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/window.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

// The columns (images x input positions) from which one GEMM per image is enough.
constexpr int64_t kMinGemmColumns = 256;

// Where the columns of one output channel lie: tap t's value for input position s at
// col[t * tap + s * pos]. The GEMM writes them tap by tap (pos 1); the packed product position by
// position (tap 1, pos the row length).
struct ColumnStrides {
  int64_t tap = 0;
  int64_t pos = 1;
  int64_t image = 0;  // from one image's columns to the next one's
};

// out (one output channel's plane) += its taps' columns, each input position's value added where
// its tap lands (skipped outside the output). kUnitPos: strides.pos is 1.
template <bool kUnitPos>
void ScatterAdd(const Window& g, const float* col, ColumnStrides strides, float* out) {
  const int64_t pos = kUnitPos ? 1 : strides.pos;
  const int64_t taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t sw = g.strides[2];
  for (int64_t t = 0; t < taps; ++t) {
    const int64_t kd = t / (g.kernel[1] * g.kernel[2]);
    const int64_t kh = (t / g.kernel[2]) % g.kernel[1];
    const int64_t kw = t % g.kernel[2];
    const float* tap = col + t * strides.tap;
    // The inputs along W whose tap lands inside the output: ow = iw * sw + shift in [0, OW).
    const int64_t shift = kw * g.dilations[2] - g.pads_begin[2];
    const int64_t iw0 = shift >= 0 ? 0 : (-shift + sw - 1) / sw;
    const int64_t iw1 = std::min(
        g.input[2], g.output[2] - shift <= 0 ? int64_t{0} : (g.output[2] - shift + sw - 1) / sw);
    if (iw0 >= iw1) continue;
    for (int64_t id = 0; id < g.input[0]; ++id) {
      const int64_t od = id * g.strides[0] - g.pads_begin[0] + kd * g.dilations[0];
      if (od < 0 || od >= g.output[0]) continue;
      for (int64_t ih = 0; ih < g.input[1]; ++ih) {
        const int64_t oh = ih * g.strides[1] - g.pads_begin[1] + kh * g.dilations[1];
        if (oh < 0 || oh >= g.output[1]) continue;
        const float* src = tap + (id * g.input[1] + ih) * g.input[2] * pos;
        float* dst = out + (od * g.output[1] + oh) * g.output[2];
        float* d = dst + shift;
        for (int64_t iw = iw0; iw < iw1; ++iw) d[iw * sw] += src[iw * pos];
      }
    }
  }
}

// out = bias + the columns when the windows tile the output (strides == kernel, nothing else):
// output (od, oh, ow) is input (od / sd, oh / sh, ow / sw)'s tap (od % sd, oh % sh, ow % sw).
// Row by output row, the row's taps along W interleaved.
template <bool kUnitPos>
void ScatterTiles(const Window& g, const float* col, ColumnStrides strides, float bias,
                  float* out) {
  const int64_t kh_count = g.kernel[1], kw_count = g.kernel[2];
  const int64_t pos = kUnitPos ? 1 : strides.pos, tap = strides.tap;
  for (int64_t od = 0; od < g.output[0]; ++od) {
    const int64_t id = od / g.kernel[0], kd = od % g.kernel[0];
    for (int64_t oh = 0; oh < g.output[1]; ++oh) {
      const int64_t ih = oh / kh_count, kh = oh % kh_count;
      const float* src =
          col + ((kd * kh_count + kh) * kw_count) * tap + (id * g.input[1] + ih) * g.input[2] * pos;
      float* dst = out + (od * g.output[1] + oh) * g.output[2];
      if (kw_count == 2) {
        const float* src1 = src + tap;
        for (int64_t iw = 0; iw < g.input[2]; ++iw) {
          dst[2 * iw] = src[iw * pos] + bias;
          dst[2 * iw + 1] = src1[iw * pos] + bias;
        }
        continue;
      }
      for (int64_t kw = 0; kw < kw_count; ++kw) {
        const float* s = src + kw * tap;
        for (int64_t iw = 0; iw < g.input[2]; ++iw) dst[iw * kw_count + kw] = s[iw * pos] + bias;
      }
    }
  }
}

// The kernel on the packed product where `try_packed` and it applies (*packed set), else on
// sgemm.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvTransposeWith(
    const PrepareContext& context, const ConvActivation& act, bool try_packed, bool* used_packed) {
  ASSIGN_OR_RETURN(int64_t group, CheckConvInputs(context, /*transposed=*/true));
  const Shape& x = context.inputs[0].shape;
  const Shape& w = context.inputs[1].shape;
  const std::vector<int64_t> spatial(x.begin() + 2, x.end());
  ASSIGN_OR_RETURN(
      Window win, TransposedWindow(context, spatial, std::vector<int64_t>(w.begin() + 2, w.end())));
  for (size_t i = 0; i < spatial.size(); ++i) {
    if (win.kernel[i] != w[i + 2]) {
      return InvalidArgument(context, "kernel_shape ", runtime::ShapeToString(win.kernel),
                             " does not match weights ", runtime::ShapeToString(w));
    }
  }
  const int64_t batch = x[0];
  const int64_t in_group = x[1] / group;  // input channels per group
  const int64_t out_group = w[1];         // output channels per group
  Shape y = {batch, out_group * group};
  y.insert(y.end(), win.output.begin(), win.output.end());
  const Window g = To3d(win);
  const int64_t in_size = g.input[0] * g.input[1] * g.input[2];
  const int64_t out_size = g.output[0] * g.output[1] * g.output[2];
  const int64_t taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t rows = out_group * taps;  // rows of the column buffer
  const bool has_bias = HasInput(context, 2);
  const int threads = context.intra_op_threads;
  // Constant weights of one group, where PreferPackedProduct says so (few input positions by
  // many weights: a generator's 512 -> 256 4x4/2 over 4x4 images), are packed once for oneDNN's
  // matmul: per image, X^T [in_size, C] (transposed into the workspace) times W [C, rows] gives
  // the columns position by position. Otherwise sgemm packs W on every call, and images share
  // one GEMM (their inputs side by side as its columns) until it has kMinGemmColumns columns,
  // so that the packing does not outweigh the product (16 columns per image there).
  // Images share a packed product too, up to PreferPackedProduct's bound on its rows; a last,
  // shorter chunk has a product of its own (the packed weights are shared).
  std::shared_ptr<const PackedProduct> packed, packed_rest;
  const int64_t packed_chunk = std::clamp<int64_t>(kPackedProductMaxRows / in_size, 1, batch);
  if (try_packed && group == 1 && context.inputs[1].data != nullptr && !context.run_once) {
    const auto* weights = static_cast<const float*>(context.inputs[1].data);
    packed = PackedProduct::Make(context, packed_chunk * in_size, rows, in_group, in_group,
                                 /*trans_b=*/false, weights, rows);
    if (packed != nullptr && batch % packed_chunk != 0) {
      packed_rest = PackedProduct::Make(context, batch % packed_chunk * in_size, rows, in_group,
                                        in_group, /*trans_b=*/false, weights, rows);
      if (packed_rest == nullptr) packed = nullptr;
    }
  }
  *used_packed = packed != nullptr;
  const int64_t chunk =
      packed != nullptr ? packed_chunk
                        : std::clamp<int64_t>((kMinGemmColumns + in_size - 1) / in_size, 1, batch);
  const int64_t chunks = (batch + chunk - 1) / chunk;
  const int64_t columns = chunk * in_size;  // of the column buffer (and the gathered input)
  // The products (one per image chunk and group) go to the threads one by one where there are
  // enough of them (ForEachProductRange), each thread with buffers of its own: the columns, the
  // gathered (or transposed) input, the packed product's scratchpad.
  const int64_t products = chunks * group;
  const int slots = threads > 1 && products >= threads ? threads : 1;
  const int64_t gathered_floats = chunk > 1 || packed != nullptr ? in_group * columns : 0;
  const size_t scratch_bytes = std::max(packed != nullptr ? packed->scratch_bytes() : 0,
                                        packed_rest != nullptr ? packed_rest->scratch_bytes() : 0);
  const int64_t scratch_floats = static_cast<int64_t>((scratch_bytes + 63) / 64 * 16);
  const int64_t slot_floats =
      (rows * columns + 15) / 16 * 16 + (gathered_floats + 15) / 16 * 16 + scratch_floats;
  ASSIGN_OR_RETURN(const int64_t workspace,
                   runtime::DenseByteSize({slot_floats, static_cast<int64_t>(slots)}, sizeof(float),
                                          "ConvTranspose's column buffers"));
  const int64_t macs = rows * columns * in_group;
  bool tiles = true;  // each output position is reached by exactly one tap of one input
  for (int i = 0; i < 3; ++i) {
    tiles = tiles && g.strides[i] == g.kernel[i] && g.dilations[i] == 1 && g.pads_begin[i] == 0 &&
            g.output[i] == g.input[i] * g.strides[i];
  }
  // Per output channel of an image: its taps' columns scattered into its plane (and the
  // activation over it).
  const double channel_cost = static_cast<double>(taps * in_size) * (tiles ? 1.0 : 2.0) +
                              (act.name.empty() ? 0.0 : static_cast<double>(out_size));
  return MakeKernel(
      context, {Desc(DataType::kFloat32, y)},
      [=](const KernelArgs& args) -> absl::Status {
        UseIntraOpThreads(threads);
        const float* xp = static_cast<const float*>(args.inputs[0]);
        const float* wp = static_cast<const float*>(args.inputs[1]);
        const float* bias = has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr;
        float* yp = static_cast<float*>(args.outputs[0]);
        return ForEachProductRange(products, macs, threads, [&](int64_t p0, int64_t p1) {
          // A thread of the split (or the caller alone) takes its own buffers.
          int slot = omp_get_thread_num();
          if (slot >= slots) slot = 0;
          float* cols = static_cast<float*>(args.workspace) + slot * slot_floats;
          float* gathered = cols + (rows * columns + 15) / 16 * 16;
          float* scratch = gathered + (gathered_floats + 15) / 16 * 16;
          // A thread of the split scatters alone; the caller alone uses the threads.
          const int scatter_threads = omp_in_parallel() ? 1 : threads;
          for (int64_t p = p0; p < p1; ++p) {
            const int64_t n0 = p / group * chunk, gi = p % group;
            const int64_t images = std::min(chunk, batch - n0);
            const int64_t width = images * in_size;  // columns of this product
            // cols[rows, width] = W_g^T [rows, in_group] * X_g [in_group, width], X_g being
            // the images' inputs side by side (gathered when more than one).
            const float* wg = wp + gi * in_group * rows;
            const float* xg = xp + (n0 * group + gi) * in_group * in_size;
            ColumnStrides strides{width, 1, in_size};
            if (packed != nullptr) {
              // cols[width, rows] = X^T [width, C] * W [C, rows], X^T being the images'
              // inputs transposed one below the other.
              for (int64_t j = 0; j < images; ++j) {
                const float* xj = xg + j * in_group * in_size;
                float* aj = gathered + j * in_size * in_group;
                for (int64_t c = 0; c < in_group; ++c) {
                  for (int64_t i = 0; i < in_size; ++i) aj[i * in_group + c] = xj[c * in_size + i];
                }
              }
              const PackedProduct& product = images == chunk ? *packed : *packed_rest;
              RETURN_IF_ERROR(product.Run(gathered, cols, scratch));
              strides = ColumnStrides{1, rows, in_size * rows};
            } else if (images > 1) {
              for (int64_t c = 0; c < in_group; ++c) {
                for (int64_t j = 0; j < images; ++j) {
                  std::copy_n(xg + (j * group * in_group + c) * in_size, in_size,
                              gathered + c * width + j * in_size);
                }
              }
              xg = gathered;
            }
            if (packed == nullptr) {
              RETURN_IF_ERROR(Sgemm(true, false, rows, width, in_group, 1.0f, wg, rows, xg, width,
                                    0.0f, cols, width));
            }
            ParallelFor(
                images * out_group, scatter_threads, channel_cost,
                [&](int64_t i0, int64_t i1) {
                  for (int64_t i = i0; i < i1; ++i) {
                    const int64_t j = i / out_group, m = i % out_group;
                    const int64_t channel = gi * out_group + m;
                    float* out = yp + ((n0 + j) * group * out_group + channel) * out_size;
                    const float b = bias != nullptr ? bias[channel] : 0.0f;
                    const float* col_m = cols + m * taps * strides.tap + j * strides.image;
                    if (tiles && strides.pos == 1) {
                      ScatterTiles<true>(g, col_m, strides, b, out);
                    } else if (tiles) {
                      ScatterTiles<false>(g, col_m, strides, b, out);
                    } else {
                      std::fill(out, out + out_size, b);
                      if (strides.pos == 1) {
                        ScatterAdd<true>(g, col_m, strides, out);
                      } else {
                        ScatterAdd<false>(g, col_m, strides, out);
                      }
                    }
                    ApplyConvActivation(act, out, out_size, 1);  // while the plane is cached
                  }
                },
                1);
          }
          return absl::OkStatus();
        });
      },
      static_cast<size_t>(workspace));
}

// Adds bias[c] (where `bias` is not null) to each plane of `plane` values of channel c (planes
// images x channels, one after another), then applies `act`, over up to `threads` threads.
void BiasAndActivation(const float* bias, const ConvActivation& act, float* y, int64_t planes,
                       int64_t channels, int64_t plane, int threads) {
  if (bias == nullptr && act.name.empty()) return;
  ParallelFor(
      planes, threads, 2.0 * static_cast<double>(plane),
      [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          float* out = y + p * plane;
          if (bias != nullptr) {
            const float b = bias[p % channels];
            for (int64_t i = 0; i < plane; ++i) out[i] += b;
          }
          ApplyConvActivation(act, out, plane, 1);
        }
      },
      1);
}

// oneDNN's deconvolution in the layouts it chooses (its direct JIT kernels work on channel
// blocks), X reordered into them and Y out of them in the workspace.
class DeconvolutionKernel final : public PreparedKernel {
 public:
  struct Parts {
    std::string op, label;
    std::vector<TensorDesc> outputs;
    dnnl::deconvolution_forward::primitive_desc pd;
    dnnl::deconvolution_forward primitive;
    dnnl::memory weights;     // in the primitive's layout
    std::vector<float> bias;  // added after the primitive (file comment; none: empty)
    dnnl::memory::desc x_plain, y_plain;
    std::optional<dnnl::reorder> x_reorder, y_reorder;
    size_t x_at = 0, y_at = 0, scratch_at = 0, total = 0;
    int threads = 1;
    ConvActivation after;  // applied to Y after the primitive (file comment)
  };
  explicit DeconvolutionKernel(Parts parts) : p_(std::move(parts)) {}

  absl::string_view op() const override { return p_.op; }
  const std::vector<TensorDesc>& outputs() const override { return p_.outputs; }
  size_t workspace_bytes() const override { return p_.total; }
  std::string implementation() const override {
    return absl::StrCat("onednn deconvolution ", p_.pd.impl_info_str());
  }

  absl::Status Run(const KernelArgs& args) const override {
    UseIntraOpThreads(p_.threads);
    auto* ws = static_cast<uint8_t*>(args.workspace);
    try {
      ReusedMemories::Run bound(memories_);
      const dnnl::memory& x_plain = bound.Bind(0, p_.x_plain, args.inputs[0]);
      const dnnl::memory& y_plain = bound.Bind(1, p_.y_plain, args.outputs[0]);
      const dnnl::memory* x = &x_plain;
      if (p_.x_reorder.has_value()) {
        x = &bound.Bind(2, p_.pd.src_desc(), ws + p_.x_at);
        ExecuteReorder(*p_.x_reorder, x_plain, *x);
      }
      const dnnl::memory& y =
          p_.y_reorder.has_value() ? bound.Bind(3, p_.pd.dst_desc(), ws + p_.y_at) : y_plain;
      dnnl_exec_arg_t exec[4] = {
          {DNNL_ARG_SRC, x->get()}, {DNNL_ARG_WEIGHTS, p_.weights.get()}, {DNNL_ARG_DST, y.get()}};
      int count = 3;
      if (p_.pd.scratchpad_desc().get_size() > 0) {
        exec[count++] = {DNNL_ARG_SCRATCHPAD,
                         bound.Bind(4, p_.pd.scratchpad_desc(), ws + p_.scratch_at).get()};
      }
      Execute(p_.primitive, exec, count);
      if (p_.y_reorder.has_value()) ExecuteReorder(*p_.y_reorder, y, y_plain);
      ThreadStream().wait();
      const Shape& y_shape = p_.outputs[0].shape;
      BiasAndActivation(p_.bias.empty() ? nullptr : p_.bias.data(), p_.after,
                        static_cast<float*>(args.outputs[0]), y_shape[0] * y_shape[1], y_shape[1],
                        y_shape[2] * y_shape[3], p_.threads);
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(p_.label, ": onednn execution failed: ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  Parts p_;
  ReusedMemories memories_;  // Run's: X, Y, src, dst, scratchpad
};

// The deconvolution kernel for a 2-D ConvTranspose of one group with constant weights (and
// bias), followed by `act`, where oneDNN has a JIT kernel for it; null otherwise.
std::unique_ptr<PreparedKernel> MaybeDeconvolution(const PrepareContext& context,
                                                   const ConvActivation& act) {
  const Shape& x = context.inputs[0].shape;
  const Shape& w = context.inputs[1].shape;
  const bool has_bias = HasInput(context, 2);
  if (x.size() != 4 || w.size() != 4 || context.run_once || context.inputs[1].data == nullptr ||
      (has_bias && context.inputs[2].data == nullptr)) {
    return nullptr;
  }
  auto group = AttrsOf(context).GetInt("group", 1);
  if (!group.ok() || *group != 1 || x[1] != w[0]) return nullptr;
  absl::StatusOr<Window> win =
      TransposedWindow(context, {x[2], x[3]}, std::vector<int64_t>(w.begin() + 2, w.end()));
  if (!win.ok() || runtime::NumElements(x) == 0 || w[1] == 0) return nullptr;
  const Shape y = {x[0], w[1], win->output[0], win->output[1]};
  if (runtime::NumElements(y) == 0) return nullptr;
  UseIntraOpThreads(context.intra_op_threads);
  try {
    using dnnl::memory;
    const dnnl::engine& engine = CpuEngine();
    // oneDNN's sizes: Y = (X - 1) * stride + (k - 1) * dilation + 1 - pad_l - pad_r, so the
    // right padding absorbs output_padding and output_shape.
    memory::dims strides, dilates, pad_l, pad_r;
    for (int i = 0; i < 2; ++i) {
      const int64_t span = (x[2 + i] - 1) * win->strides[i] +
                           (win->kernel[i] - 1) * win->dilations[i] + 1 - win->pads_begin[i];
      strides.push_back(win->strides[i]);
      dilates.push_back(win->dilations[i] - 1);
      pad_l.push_back(win->pads_begin[i]);
      pad_r.push_back(span - y[2 + i]);
    }
    const auto any = memory::format_tag::any;
    const memory::desc x_any({x[0], x[1], x[2], x[3]}, memory::data_type::f32, any);
    const memory::desc y_any({y[0], y[1], y[2], y[3]}, memory::data_type::f32, any);
    const memory::desc w_any({w[1], w[0], w[2], w[3]}, memory::data_type::f32, any);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::deconvolution_forward::primitive_desc pd(
        dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::deconvolution_direct, x_any, w_any,
                                          y_any, strides, dilates, pad_l, pad_r),
        attr, engine);
    if (!absl::StartsWith(pd.impl_info_str(), "jit")) return nullptr;
    DeconvolutionKernel::Parts parts;
    parts.op = std::string(context.op);
    parts.label = NodeLabel(context);
    parts.after = act;
    parts.outputs = {Desc(DataType::kFloat32, y)};
    parts.threads = context.intra_op_threads;
    parts.x_plain = PlainDesc(x);
    parts.y_plain = PlainDesc(y);
    // ONNX's weights [C_in, C_out, kh, kw] are oneDNN's [C_out, C_in, kh, kw] stored iohw.
    dnnl::stream stream(engine);
    const memory::desc w_onnx({w[1], w[0], w[2], w[3]}, memory::data_type::f32,
                              memory::format_tag::iohw);
    memory w_user(w_onnx, engine, const_cast<void*>(context.inputs[1].data));
    parts.weights = memory(pd.weights_desc(), engine);
    dnnl::reorder(w_user, parts.weights).execute(stream, w_user, parts.weights);
    if (has_bias) {
      const auto* b = static_cast<const float*>(context.inputs[2].data);
      parts.bias.assign(b, b + w[1]);
    }
    stream.wait();
    size_t at = ConvAlignUp(pd.scratchpad_desc().get_size());
    if (pd.src_desc() != parts.x_plain) {
      parts.x_reorder = dnnl::reorder(
          dnnl::reorder::primitive_desc(engine, parts.x_plain, engine, pd.src_desc()));
      parts.x_at = at;
      at += ConvAlignUp(pd.src_desc().get_size());
    }
    if (pd.dst_desc() != parts.y_plain) {
      parts.y_reorder = dnnl::reorder(
          dnnl::reorder::primitive_desc(engine, pd.dst_desc(), engine, parts.y_plain));
      parts.y_at = at;
      at += ConvAlignUp(pd.dst_desc().get_size());
    }
    parts.total = at;
    parts.primitive = dnnl::deconvolution_forward(pd);
    parts.pd = std::move(pd);
    return std::make_unique<DeconvolutionKernel>(std::move(parts));
  } catch (const dnnl::error&) {
    return nullptr;  // no such primitive (our own kernel runs)
  }
}

// The packed product beat sgemm's for a generator's few input positions (512 -> 256 4x4/2
// over 4x4 images, batch 1, one thread: 1054 -> 727 us) but not for the mask head's
// (256 -> 256 2x2/2 over 100 images of 14x14: 110-120 -> 131-135 ms, its columns read across
// rows in the scatter): both, the faster by timed runs (FasterOf). oneDNN's deconvolution
// (its direct kernel on channel blocks) beat both on a generator's layers where the output
// has many channels (batch 1, one thread, us ours / oneDNN's: 100 -> 512 1x1 -> 4x4 224 / 49,
// 512 -> 256 4x4/2 806 / 456, 256 -> 128 700 / 502) but not where it has few (64 -> 3: 100 /
// 359): it races the faster of ours.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvTranspose(
    const PrepareContext& context) {
  ConvActivation act;
  if (context.op == kFusedConvTransposeOp) {
    ASSIGN_OR_RETURN(act, ReadConvActivation(AttrsOf(context), ""));
    dnnl::post_ops known;
    if (!AppendActivation(act, &known)) {
      return InvalidArgument(context, "unknown activation \"", act.name, "\"");
    }
  }
  bool packed = false;
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> kernel,
                   PrepareConvTransposeWith(context, act, /*try_packed=*/true, &packed));
  if (packed) {
    ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> plain,
                     PrepareConvTransposeWith(context, act, /*try_packed=*/false, &packed));
    ASSIGN_OR_RETURN(kernel, FasterOf(std::move(plain), std::move(kernel), NextTrialPhase()));
  }
  std::unique_ptr<PreparedKernel> onednn = MaybeDeconvolution(context, act);
  if (onednn == nullptr) return kernel;
  return FasterOf(std::move(kernel), std::move(onednn), NextTrialPhase());
}

}  // namespace

absl::Status RegisterConvTransposeKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("ConvTranspose", &PrepareConvTranspose));
  return registry->Register(kFusedConvTransposeOp, &PrepareConvTranspose);
}

}  // namespace reprise::kernels::cpu
