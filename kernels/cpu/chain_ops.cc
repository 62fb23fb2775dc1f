// kFusedGlobalAveragePoolOp / kFusedChannelScaleOp / kFusedAddOp: a squeeze-and-excitation
// block's global average and its per-channel scale (EfficientNet, MobileNetV3, RegNetY), a
// BatchNormalization with its ReLU that no convolution absorbs (DenseNet's), and a residual sum
// of two such values (ConvMixer's), inside a chain of convolutions, as our
// own loops over the layout each value is stored in ("x_layout", "y_layout":
// plain, channels-last or the chain's channel blocks; onednn_util.h, Storage). The block's
// depthwise output and its projection's input then stay in the convolutions' layout instead of
// being reordered to the plain layout and back around the two ops.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

using dnnl::memory;

// Every (h, w) of an image's group of lanes is one row of `lanes` floats, the rows one after
// another (channel blocks and channels-last are stored so).
bool RowsAreContiguous(const Placement& p, int64_t channels, int64_t width) {
  const int64_t lanes = Lanes(p, channels);
  return p.ChannelsInner() && p.w_stride == lanes && p.h_stride == width * lanes;
}

// out[l] = the sum (kMax false) or the largest (kMax; NaN skipped, as ReduceMax's kernel) of
// `rows` rows of kLanes floats: four partial results, so that consecutive rows do not wait on
// each other.
template <int kLanes, bool kMax>
void ReduceRows(const float* __restrict rows_at, int64_t rows, float* __restrict out) {
  constexpr float kInit = kMax ? -INFINITY : 0.0f;
  auto take = [](float v, float a) {
    if constexpr (kMax) {
      return v > a ? v : a;
    } else {
      return a + v;
    }
  };
  float acc[4][kLanes];
  for (auto& part : acc) std::fill(part, part + kLanes, kInit);
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < kLanes; ++l) acc[k][l] = take(rows_at[(r + k) * kLanes + l], acc[k][l]);
    }
  }
  for (; r < rows; ++r) {
    for (int l = 0; l < kLanes; ++l) acc[0][l] = take(rows_at[r * kLanes + l], acc[0][l]);
  }
  for (int l = 0; l < kLanes; ++l) {
    out[l] = take(take(acc[3][l], acc[2][l]), take(acc[1][l], acc[0][l]));
  }
}

// to[r][l] = from[r][l] * scale[l] + shift[l] (then max(., 0) with kRelu) over `rows` rows of
// kLanes floats.
template <int kLanes, bool kRelu>
void AffineRows(const float* __restrict from, const float* __restrict scale,
                const float* __restrict shift, int64_t rows, float* __restrict to) {
  float s[kLanes], t[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    s[l] = scale[l];
    t[l] = shift[l];
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int l = 0; l < kLanes; ++l) {
      const float v = from[r * kLanes + l] * s[l] + t[l];
      to[r * kLanes + l] = kRelu ? std::max(v, 0.0f) : v;
    }
  }
}

// Zeros in the channels of `y` (4-D `x`, placed as `py`) past x's C in its last block.
void ZeroPaddingLanes(const Placement& py, const Shape& x, float* y) {
  const int64_t padded = (x[1] + py.block - 1) / py.block * py.block;
  for (int64_t n = 0; n < x[0]; ++n) {
    for (int64_t c = x[1]; c < padded; ++c) {
      for (int64_t h = 0; h < x[2]; ++h) {
        for (int64_t w = 0; w < x[3]; ++w) y[py.At(n, c, h, w)] = 0.0f;
      }
    }
  }
}

// One value per (image, channel) of an input that broadcasts over H and W: element (n, c) at
// n * n_stride + c * c_stride (a stride 0 where it broadcasts).
struct PerChannel {
  int64_t n_stride = 0, c_stride = 0;
  float At(const float* v, int64_t n, int64_t c) const { return v[n * n_stride + c * c_stride]; }
};

// The global average or maximum over H and W of every (image, channel) of a 4-D value (a 3-D
// one [N, C, W] taken as [N, C, 1, W]), into plain [N, C] values.
class GlobalPoolKernel final : public PreparedKernel {
 public:
  GlobalPoolKernel(bool max, Shape x, Placement px, std::vector<TensorDesc> outputs, int threads)
      : max_(max), x_(std::move(x)), px_(px), outputs_(std::move(outputs)), threads_(threads) {}

  absl::string_view op() const override {
    return max_ ? kFusedGlobalMaxPoolOp : kFusedGlobalAveragePoolOp;
  }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }

  absl::Status Run(const KernelArgs& args) const override {
    return max_ ? RunAs<true>(args) : RunAs<false>(args);
  }

 private:
  template <bool kMax>
  absl::Status RunAs(const KernelArgs& args) const {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    const int64_t n_images = x_[0], channels = x_[1], height = x_[2], width = x_[3];
    const int64_t plane = height * width;
    // The mean multiplies by 1 / (H * W); a maximum keeps its value.
    const float inv = kMax ? 1.0f : 1.0f / static_cast<float>(plane);
    if (RowsAreContiguous(px_, channels, width)) {
      // Each (image, group of lanes) reduces its rows of lanes into the output's channels.
      const int64_t lanes = Lanes(px_, channels);
      const int64_t groups = (channels + lanes - 1) / lanes;
      ParallelFor(n_images * groups, threads_, static_cast<double>(plane * lanes),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t item = begin; item < end; ++item) {
                      const int64_t n = item / groups, c0 = item % groups * lanes;
                      const int64_t valid = std::min(lanes, channels - c0);
                      const float* at = x + px_.At(n, c0, 0, 0);
                      float* out = y + n * channels + c0;
                      float by_lane[16];
                      if (lanes == 16 || lanes == 8) {
                        if (lanes == 16) ReduceRows<16, kMax>(at, plane, by_lane);
                        if (lanes == 8) ReduceRows<8, kMax>(at, plane, by_lane);
                        for (int64_t l = 0; l < valid; ++l) out[l] = by_lane[l] * inv;
                        continue;
                      }
                      std::fill(out, out + valid, kMax ? -INFINITY : 0.0f);
                      for (int64_t r = 0; r < plane; ++r) {
                        for (int64_t l = 0; l < valid; ++l) {
                          const float v = at[r * lanes + l];
                          out[l] = kMax ? (v > out[l] ? v : out[l]) : out[l] + v;
                        }
                      }
                      for (int64_t l = 0; l < valid; ++l) out[l] *= inv;
                    }
                  });
      return absl::OkStatus();
    }
    const bool contiguous_planes = px_.w_stride == 1 && px_.h_stride == width;
    ParallelFor(n_images * channels, threads_, static_cast<double>(plane),
                [&](int64_t begin, int64_t end) {
                  for (int64_t item = begin; item < end; ++item) {
                    const float* at = x + px_.At(item / channels, item % channels, 0, 0);
                    float result = kMax ? -INFINITY : 0.0f;
                    auto take = [&result](float v) {
                      result = kMax ? (v > result ? v : result) : result + v;
                    };
                    int64_t done = 0;
                    if (contiguous_planes) {
                      // A plain plane: rows of 16 floats, then the rest.
                      float by_lane[16];
                      ReduceRows<16, kMax>(at, plane / 16, by_lane);
                      for (float v : by_lane) take(v);
                      for (done = plane / 16 * 16; done < plane; ++done) take(at[done]);
                    } else {
                      for (int64_t h = 0; h < height; ++h) {
                        for (int64_t w = 0; w < width; ++w) {
                          take(at[h * px_.h_stride + w * px_.w_stride]);
                        }
                      }
                    }
                    y[item] = result * inv;
                  }
                });
    return absl::OkStatus();
  }

  bool max_;
  Shape x_;
  Placement px_;
  std::vector<TensorDesc> outputs_;
  int threads_;
};

class ChannelScaleKernel final : public PreparedKernel {
 public:
  struct Parts {
    Shape x;
    Placement px, py;
    size_t y_bytes = 0;
    PerChannel scale, shift;  // shift: input 2 when `has_shift`
    bool has_shift = false, relu = false;
    std::vector<TensorDesc> outputs;
    int threads = 1;
  };

  explicit ChannelScaleKernel(Parts parts) : p_(std::move(parts)) {}

  absl::string_view op() const override { return kFusedChannelScaleOp; }
  const std::vector<TensorDesc>& outputs() const override { return p_.outputs; }
  size_t output_storage_bytes(size_t i) const override { return i == 0 ? p_.y_bytes : 0; }

  absl::Status Run(const KernelArgs& args) const override {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* s = static_cast<const float*>(args.inputs[1]);
    const float* t = p_.has_shift ? static_cast<const float*>(args.inputs[2]) : nullptr;
    float* y = static_cast<float*>(args.outputs[0]);
    const int64_t n_images = p_.x[0], channels = p_.x[1], height = p_.x[2], width = p_.x[3];
    const int64_t plane = height * width;
    const Placement& px = p_.px;
    const Placement& py = p_.py;
    auto shift_at = [&](int64_t n, int64_t c) {
      return t != nullptr ? p_.shift.At(t, n, c) : 0.0f;
    };
    auto activate = [&](float v) { return p_.relu ? std::max(v, 0.0f) : v; };
    if (px == py && RowsAreContiguous(px, channels, width)) {
      // Per (image, group of lanes): its rows; a block's padding lanes written as zeros.
      const int64_t lanes = Lanes(px, channels);
      const int64_t groups = (channels + lanes - 1) / lanes;
      ParallelFor(n_images * groups, p_.threads, static_cast<double>(plane * lanes),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t item = begin; item < end; ++item) {
                      const int64_t n = item / groups, c0 = item % groups * lanes;
                      const int64_t valid = std::min(lanes, channels - c0);
                      const int64_t at = px.At(n, c0, 0, 0);
                      if (lanes == 16 || lanes == 8) {
                        float by_lane[16] = {}, plus[16] = {};
                        for (int64_t l = 0; l < valid; ++l) {
                          by_lane[l] = p_.scale.At(s, n, c0 + l);
                          plus[l] = shift_at(n, c0 + l);
                        }
                        if (lanes == 16) {
                          (p_.relu ? AffineRows<16, true>
                                   : AffineRows<16, false>)(x + at, by_lane, plus, plane, y + at);
                        } else {
                          (p_.relu ? AffineRows<8, true>
                                   : AffineRows<8, false>)(x + at, by_lane, plus, plane, y + at);
                        }
                      } else {
                        for (int64_t r = 0; r < plane; ++r) {
                          const float* from = x + at + r * lanes;
                          float* to = y + at + r * lanes;
                          for (int64_t l = 0; l < valid; ++l) {
                            to[l] =
                                activate(from[l] * p_.scale.At(s, n, c0 + l) + shift_at(n, c0 + l));
                          }
                        }
                      }
                      if (valid < lanes) {
                        for (int64_t r = 0; r < plane; ++r) {
                          std::fill(y + at + r * lanes + valid, y + at + (r + 1) * lanes, 0.0f);
                        }
                      }
                    }
                  });
      return absl::OkStatus();
    }
    // Any two placements: one (image, channel) plane at a time; then the output's padding.
    ParallelFor(n_images * channels, p_.threads, static_cast<double>(plane),
                [&](int64_t begin, int64_t end) {
                  for (int64_t item = begin; item < end; ++item) {
                    const int64_t n = item / channels, c = item % channels;
                    const float scale = p_.scale.At(s, n, c), shift = shift_at(n, c);
                    const float* from = x + px.At(n, c, 0, 0);
                    float* to = y + py.At(n, c, 0, 0);
                    for (int64_t h = 0; h < height; ++h) {
                      for (int64_t w = 0; w < width; ++w) {
                        to[h * py.h_stride + w * py.w_stride] =
                            activate(from[h * px.h_stride + w * px.w_stride] * scale + shift);
                      }
                    }
                  }
                });
    ZeroPaddingLanes(py, p_.x, y);
    return absl::OkStatus();
  }

 private:
  Parts p_;
};

// Y = X0 + X1 (or X0 - X1).
template <bool kSubtract>
void AddRange(const float* __restrict a, const float* __restrict b, float* __restrict y,
              int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = kSubtract ? a[i] - b[i] : a[i] + b[i];
}

class AddKernel final : public PreparedKernel {
 public:
  struct Parts {
    Shape x;
    Placement p0, p1, py;
    size_t y_bytes = 0;
    bool subtract = false;
    ConvActivation act;
    std::vector<TensorDesc> outputs;
    int threads = 1;
  };

  explicit AddKernel(Parts parts) : p_(std::move(parts)) {}

  absl::string_view op() const override { return kFusedAddOp; }
  const std::vector<TensorDesc>& outputs() const override { return p_.outputs; }
  size_t output_storage_bytes(size_t i) const override { return i == 0 ? p_.y_bytes : 0; }

  absl::Status Run(const KernelArgs& args) const override {
    const float* a = static_cast<const float*>(args.inputs[0]);
    const float* b = static_cast<const float*>(args.inputs[1]);
    float* y = static_cast<float*>(args.outputs[0]);
    const auto range = p_.subtract ? &AddRange<true> : &AddRange<false>;
    if (p_.p0 == p_.py && p_.p1 == p_.py) {
      // One storage: float by float over all of it (a block's padding lanes: 0 + 0), each range
      // activated while in the cache; then padding lanes that the activation moved off zero
      // (Sigmoid's 0.5) zeroed again.
      const int64_t count = static_cast<int64_t>(p_.y_bytes / sizeof(float));
      ParallelFor(count, p_.threads, p_.act.name.empty() ? 1.0 : 4.0,
                  [&](int64_t begin, int64_t end) {
                    range(a + begin, b + begin, y + begin, end - begin);
                    ApplyConvActivation(p_.act, y + begin, end - begin, 1);
                  });
      if (ApplyActivation(p_.act, 0.0f) != 0.0f) ZeroPaddingLanes(p_.py, p_.x, y);
      return absl::OkStatus();
    }
    // Any placements: one (image, channel) plane at a time; then the output's padding.
    const int64_t channels = p_.x[1], height = p_.x[2], width = p_.x[3];
    const Placement &p0 = p_.p0, &p1 = p_.p1, &py = p_.py;
    ParallelFor(p_.x[0] * channels, p_.threads, 2.0 * static_cast<double>(height * width),
                [&](int64_t begin, int64_t end) {
                  for (int64_t item = begin; item < end; ++item) {
                    const int64_t n = item / channels, c = item % channels;
                    for (int64_t h = 0; h < height; ++h) {
                      for (int64_t w = 0; w < width; ++w) {
                        const float u = a[p0.At(n, c, h, w)], v = b[p1.At(n, c, h, w)];
                        y[py.At(n, c, h, w)] = ApplyActivation(p_.act, p_.subtract ? u - v : u + v);
                      }
                    }
                  }
                });
    ZeroPaddingLanes(py, p_.x, y);
    return absl::OkStatus();
  }

 private:
  Parts p_;
};

template <bool kMax>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGlobalPool(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& x = context.inputs[0].shape;
  if (x.size() != 4 && x.size() != 3) {
    return InvalidArgument(context, "input ", runtime::ShapeToString(x), " is neither 3-D nor 4-D");
  }
  ASSIGN_OR_RETURN(int64_t keepdims, AttrsOf(context).GetInt("keepdims", 1));
  ASSIGN_OR_RETURN(Storage x_storage, LayoutAttr(context, "x_layout"));
  ASSIGN_OR_RETURN(Placement px, PlacementOf(context, x, x_storage));
  Shape y = {x[0], x[1]};
  if (keepdims != 0) y.resize(x.size(), 1);
  const Shape as_4d = x.size() == 4 ? x : Shape{x[0], x[1], 1, x[2]};
  return std::make_unique<GlobalPoolKernel>(kMax, as_4d, px,
                                            std::vector<TensorDesc>{Desc(DataType::kFloat32, y)},
                                            context.intra_op_threads);
}

// Input `k` as one value per channel of the 4-D `x`: aligned to the right of [N, C, H, W], 1
// across H and W, and 1 or x's size across C and N.
absl::StatusOr<PerChannel> PerChannelInput(const PrepareContext& context, size_t k,
                                           const Shape& x) {
  RETURN_IF_ERROR(ExpectType(context, k, {DataType::kFloat32}));
  const Shape& v = context.inputs[k].shape;
  auto dim = [&v](size_t from_right) {
    return from_right < v.size() ? v[v.size() - 1 - from_right] : int64_t{1};
  };
  if (v.size() > 4 || dim(0) != 1 || dim(1) != 1 || (dim(2) != 1 && dim(2) != x[1]) ||
      (dim(3) != 1 && dim(3) != x[0])) {
    return InvalidArgument(context, "input ", k, " ", runtime::ShapeToString(v),
                           " is not one value per channel of ", runtime::ShapeToString(x));
  }
  PerChannel p;
  p.c_stride = dim(2) == 1 ? 0 : 1;
  p.n_stride = dim(3) == 1 ? 0 : dim(2);
  return p;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareChannelScale(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 3));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  ChannelScaleKernel::Parts p;
  p.x = context.inputs[0].shape;
  if (p.x.size() != 4) {
    return InvalidArgument(context, "input 0 ", runtime::ShapeToString(p.x), " is not 4-D");
  }
  ASSIGN_OR_RETURN(p.scale, PerChannelInput(context, 1, p.x));
  p.has_shift = HasInput(context, 2);
  if (p.has_shift) {
    ASSIGN_OR_RETURN(p.shift, PerChannelInput(context, 2, p.x));
  }
  absl::StatusOr<std::string> activation = AttrsOf(context).GetString("activation", "");
  if (!activation.ok()) return activation.status();
  if (!activation->empty() && *activation != "Relu") {
    return InvalidArgument(context, "activation \"", *activation, "\" is neither \"\" nor Relu");
  }
  p.relu = *activation == "Relu";
  ASSIGN_OR_RETURN(Storage x_storage, LayoutAttr(context, "x_layout"));
  ASSIGN_OR_RETURN(Storage y_storage, LayoutAttr(context, "y_layout"));
  ASSIGN_OR_RETURN(p.px, PlacementOf(context, p.x, x_storage));
  ASSIGN_OR_RETURN(p.py, PlacementOf(context, p.x, y_storage));
  p.y_bytes = StoredDesc(p.x, y_storage, ChainTag(context)).get_size();
  p.outputs = {Desc(DataType::kFloat32, p.x)};
  p.threads = context.intra_op_threads;
  return std::make_unique<ChannelScaleKernel>(std::move(p));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareAdd(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  AddKernel::Parts p;
  p.x = context.inputs[0].shape;
  for (size_t k = 0; k < 2; ++k) {
    RETURN_IF_ERROR(ExpectType(context, k, {DataType::kFloat32}));
    if (context.inputs[k].shape != p.x || p.x.size() != 4) {
      return InvalidArgument(context, "inputs ", runtime::ShapeToString(p.x), " and ",
                             runtime::ShapeToString(context.inputs[1].shape),
                             " are not two 4-D values of one shape");
    }
  }
  ASSIGN_OR_RETURN(int64_t subtract, AttrsOf(context).GetInt("subtract", 0));
  p.subtract = subtract != 0;
  ASSIGN_OR_RETURN(p.act, ReadConvActivation(AttrsOf(context), ""));
  dnnl::post_ops known;  // the names a convolution takes (AppendActivation's list)
  if (!AppendActivation(p.act, &known)) {
    return InvalidArgument(context, "unknown activation \"", p.act.name, "\"");
  }
  ASSIGN_OR_RETURN(Storage s0, LayoutAttr(context, "x0_layout"));
  ASSIGN_OR_RETURN(Storage s1, LayoutAttr(context, "x1_layout"));
  ASSIGN_OR_RETURN(Storage y_storage, LayoutAttr(context, "y_layout"));
  ASSIGN_OR_RETURN(p.p0, PlacementOf(context, p.x, s0));
  ASSIGN_OR_RETURN(p.p1, PlacementOf(context, p.x, s1));
  ASSIGN_OR_RETURN(p.py, PlacementOf(context, p.x, y_storage));
  p.y_bytes = StoredDesc(p.x, y_storage, ChainTag(context)).get_size();
  p.outputs = {Desc(DataType::kFloat32, p.x)};
  p.threads = context.intra_op_threads;
  return std::make_unique<AddKernel>(std::move(p));
}

}  // namespace

absl::Status RegisterChainKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register(kFusedGlobalAveragePoolOp, &PrepareGlobalPool<false>));
  RETURN_IF_ERROR(registry->Register(kFusedGlobalMaxPoolOp, &PrepareGlobalPool<true>));
  RETURN_IF_ERROR(registry->Register(kFusedAddOp, &PrepareAdd));
  return registry->Register(kFusedChannelScaleOp, &PrepareChannelScale);
}

}  // namespace reprise::kernels::cpu
