// kFusedGlobalAveragePoolOp / kFusedChannelScaleOp: a squeeze-and-excitation block's global
// average and its per-channel scale inside a chain of convolutions (EfficientNet, MobileNetV3,
// RegNetY), as our own loops over the layout each value is stored in ("x_layout", "y_layout":
// plain, channels-last or the chain's channel blocks; onednn_util.h, Storage). The block's
// depthwise output and its projection's input then stay in the convolutions' layout instead of
// being reordered to the plain layout and back around the two ops.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

using dnnl::memory;

// Where element (n, c, h, w) of a 4-D value is stored, in floats:
// n * n_stride + (c / block) * c_stride + h * h_stride + w * w_stride + c % block.
// Plain: block 1, c_stride H * W. Channels-last: block 1, c_stride 1. Channel blocks (nChw16c,
// nChw8c): block 16 or 8, c_stride H * W * block; the channels past C in the last block are
// padding (written as zeros).
struct Placement {
  int64_t block = 1;
  int64_t n_stride = 0, c_stride = 0, h_stride = 0, w_stride = 0;

  int64_t At(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return n * n_stride + (c / block) * c_stride + h * h_stride + w * w_stride + c % block;
  }
  // Consecutive channels lie next to each other: `lanes` of them from a multiple of `lanes`.
  bool ChannelsInner() const { return block > 1 || c_stride == 1; }
  bool operator==(const Placement& o) const {
    return block == o.block && n_stride == o.n_stride && c_stride == o.c_stride &&
           h_stride == o.h_stride && w_stride == o.w_stride;
  }
};

// The placement of a 4-D float value stored as `how` (a plain descriptor, channels-last, or
// the chain's blocked layout `chain`).
absl::StatusOr<Placement> PlacementOf(const runtime::PrepareContext& context, const Shape& dims,
                                      Storage how) {
  const memory::desc desc = StoredDesc(dims, how, ChainTag(context));
  const dnnl_memory_desc_t& md = desc.data;
  const auto& blocking = md.format_desc.blocking;
  if (md.ndims != 4 || md.format_kind != dnnl_blocked || blocking.inner_nblks > 1 ||
      (blocking.inner_nblks == 1 && blocking.inner_idxs[0] != 1)) {
    return Unimplemented(context, "the stored layout of ", runtime::ShapeToString(dims),
                         " is not plain, channels-last or channel blocks");
  }
  Placement p;
  p.block = blocking.inner_nblks == 1 ? blocking.inner_blks[0] : 1;
  p.n_stride = blocking.strides[0];
  p.c_stride = blocking.strides[1];
  p.h_stride = blocking.strides[2];
  p.w_stride = blocking.strides[3];
  return p;
}

// Channels handled together when they lie next to each other: a block, or all of them.
int64_t Lanes(const Placement& p, int64_t channels) { return p.block > 1 ? p.block : channels; }

// Every (h, w) of an image's group of lanes is one row of `lanes` floats, the rows one after
// another (channel blocks and channels-last are stored so).
bool RowsAreContiguous(const Placement& p, int64_t channels, int64_t width) {
  const int64_t lanes = Lanes(p, channels);
  return p.ChannelsInner() && p.w_stride == lanes && p.h_stride == width * lanes;
}

// out[l] = the sum of `rows` rows of kLanes floats: four partial sums, so that the additions
// of consecutive rows do not wait on each other.
template <int kLanes>
void SumRows(const float* __restrict rows_at, int64_t rows, float* __restrict out) {
  float acc[4][kLanes] = {};
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < kLanes; ++l) acc[k][l] += rows_at[(r + k) * kLanes + l];
    }
  }
  for (; r < rows; ++r) {
    for (int l = 0; l < kLanes; ++l) acc[0][l] += rows_at[r * kLanes + l];
  }
  for (int l = 0; l < kLanes; ++l) out[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
}

// to[r][l] = from[r][l] * scale[l] over `rows` rows of kLanes floats.
template <int kLanes>
void ScaleRows(const float* __restrict from, const float* __restrict scale, int64_t rows,
               float* __restrict to) {
  float s[kLanes];
  for (int l = 0; l < kLanes; ++l) s[l] = scale[l];
  for (int64_t r = 0; r < rows; ++r) {
    for (int l = 0; l < kLanes; ++l) to[r * kLanes + l] = from[r * kLanes + l] * s[l];
  }
}

class GlobalAverageKernel final : public PreparedKernel {
 public:
  GlobalAverageKernel(Shape x, Placement px, std::vector<TensorDesc> outputs, int threads)
      : x_(std::move(x)), px_(px), outputs_(std::move(outputs)), threads_(threads) {}

  absl::string_view op() const override { return kFusedGlobalAveragePoolOp; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }

  absl::Status Run(const KernelArgs& args) const override {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    const int64_t n_images = x_[0], channels = x_[1], height = x_[2], width = x_[3];
    const float inv = 1.0f / static_cast<float>(height * width);
    if (RowsAreContiguous(px_, channels, width)) {
      // Each (image, group of lanes) sums its rows of lanes into the output's channels.
      const int64_t lanes = Lanes(px_, channels), rows = height * width;
      const int64_t groups = (channels + lanes - 1) / lanes;
      ParallelFor(n_images * groups, threads_, static_cast<double>(rows * lanes),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t item = begin; item < end; ++item) {
                      const int64_t n = item / groups, c0 = item % groups * lanes;
                      const int64_t valid = std::min(lanes, channels - c0);
                      const float* at = x + px_.At(n, c0, 0, 0);
                      float* out = y + n * channels + c0;
                      float sums[16];
                      if (lanes == 16 || lanes == 8) {
                        if (lanes == 16) SumRows<16>(at, rows, sums);
                        if (lanes == 8) SumRows<8>(at, rows, sums);
                        for (int64_t l = 0; l < valid; ++l) out[l] = sums[l] * inv;
                        continue;
                      }
                      std::fill(out, out + valid, 0.0f);
                      for (int64_t r = 0; r < rows; ++r) {
                        for (int64_t l = 0; l < valid; ++l) out[l] += at[r * lanes + l];
                      }
                      for (int64_t l = 0; l < valid; ++l) out[l] *= inv;
                    }
                  });
      return absl::OkStatus();
    }
    ParallelFor(n_images * channels, threads_, static_cast<double>(height * width),
                [&](int64_t begin, int64_t end) {
                  for (int64_t item = begin; item < end; ++item) {
                    const float* plane = x + px_.At(item / channels, item % channels, 0, 0);
                    float sum = 0.0f;
                    for (int64_t h = 0; h < height; ++h) {
                      for (int64_t w = 0; w < width; ++w) {
                        sum += plane[h * px_.h_stride + w * px_.w_stride];
                      }
                    }
                    y[item] = sum * inv;
                  }
                });
    return absl::OkStatus();
  }

 private:
  Shape x_;
  Placement px_;
  std::vector<TensorDesc> outputs_;
  int threads_;
};

class ChannelScaleKernel final : public PreparedKernel {
 public:
  // `s_n_stride` / `s_c_stride`: the scale's strides over images and channels (0 where it
  // broadcasts).
  ChannelScaleKernel(Shape x, Placement px, Placement py, size_t y_bytes, int64_t s_n_stride,
                     int64_t s_c_stride, std::vector<TensorDesc> outputs, int threads)
      : x_(std::move(x)),
        px_(px),
        py_(py),
        y_bytes_(y_bytes),
        s_n_stride_(s_n_stride),
        s_c_stride_(s_c_stride),
        outputs_(std::move(outputs)),
        threads_(threads) {}

  absl::string_view op() const override { return kFusedChannelScaleOp; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t output_storage_bytes(size_t i) const override { return i == 0 ? y_bytes_ : 0; }

  absl::Status Run(const KernelArgs& args) const override {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* s = static_cast<const float*>(args.inputs[1]);
    float* y = static_cast<float*>(args.outputs[0]);
    const int64_t n_images = x_[0], channels = x_[1], height = x_[2], width = x_[3];
    const int64_t plane = height * width;
    if (px_ == py_ && RowsAreContiguous(px_, channels, width)) {
      // Per (image, group of lanes): its rows scaled; a block's padding lanes written as zeros.
      const int64_t lanes = Lanes(px_, channels);
      const int64_t groups = (channels + lanes - 1) / lanes;
      ParallelFor(n_images * groups, threads_, static_cast<double>(plane * lanes),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t item = begin; item < end; ++item) {
                      const int64_t n = item / groups, c0 = item % groups * lanes;
                      const int64_t valid = std::min(lanes, channels - c0);
                      const int64_t at = px_.At(n, c0, 0, 0);
                      const float* scale = s + n * s_n_stride_ + c0 * s_c_stride_;
                      if (lanes == 16 || lanes == 8) {
                        float by_lane[16] = {};
                        for (int64_t l = 0; l < valid; ++l) by_lane[l] = scale[l * s_c_stride_];
                        if (lanes == 16) ScaleRows<16>(x + at, by_lane, plane, y + at);
                        if (lanes == 8) ScaleRows<8>(x + at, by_lane, plane, y + at);
                      } else {
                        for (int64_t r = 0; r < plane; ++r) {
                          const float* from = x + at + r * lanes;
                          float* to = y + at + r * lanes;
                          for (int64_t l = 0; l < valid; ++l) {
                            to[l] = from[l] * scale[l * s_c_stride_];
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
    ParallelFor(n_images * channels, threads_, static_cast<double>(plane),
                [&](int64_t begin, int64_t end) {
                  for (int64_t item = begin; item < end; ++item) {
                    const int64_t n = item / channels, c = item % channels;
                    const float scale = s[n * s_n_stride_ + c * s_c_stride_];
                    const float* from = x + px_.At(n, c, 0, 0);
                    float* to = y + py_.At(n, c, 0, 0);
                    for (int64_t h = 0; h < height; ++h) {
                      for (int64_t w = 0; w < width; ++w) {
                        to[h * py_.h_stride + w * py_.w_stride] =
                            from[h * px_.h_stride + w * px_.w_stride] * scale;
                      }
                    }
                  }
                });
    const int64_t padded = (channels + py_.block - 1) / py_.block * py_.block;
    for (int64_t n = 0; n < n_images; ++n) {
      for (int64_t c = channels; c < padded; ++c) {
        for (int64_t h = 0; h < height; ++h) {
          for (int64_t w = 0; w < width; ++w) y[py_.At(n, c, h, w)] = 0.0f;
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  Shape x_;
  Placement px_, py_;
  size_t y_bytes_;
  int64_t s_n_stride_, s_c_stride_;
  std::vector<TensorDesc> outputs_;
  int threads_;
};

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGlobalAverage(
    const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& x = context.inputs[0].shape;
  if (x.size() != 4) {
    return InvalidArgument(context, "input ", runtime::ShapeToString(x), " is not 4-D");
  }
  ASSIGN_OR_RETURN(Storage x_storage, LayoutAttr(context, "x_layout"));
  ASSIGN_OR_RETURN(Placement px, PlacementOf(context, x, x_storage));
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, {x[0], x[1], 1, 1})};
  return std::make_unique<GlobalAverageKernel>(x, px, std::move(outputs), context.intra_op_threads);
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareChannelScale(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kFloat32}));
  const Shape& x = context.inputs[0].shape;
  const Shape& s = context.inputs[1].shape;
  if (x.size() != 4) {
    return InvalidArgument(context, "input 0 ", runtime::ShapeToString(x), " is not 4-D");
  }
  // The scale, aligned to the right of [N, C, H, W]: 1 across H and W, and 1 or the input's
  // size across C and N.
  auto dim = [&s](size_t from_right) {
    return from_right < s.size() ? s[s.size() - 1 - from_right] : int64_t{1};
  };
  if (s.size() > 4 || dim(0) != 1 || dim(1) != 1 || (dim(2) != 1 && dim(2) != x[1]) ||
      (dim(3) != 1 && dim(3) != x[0])) {
    return InvalidArgument(context, "scale ", runtime::ShapeToString(s),
                           " is not one value per channel of ", runtime::ShapeToString(x));
  }
  const int64_t s_c_stride = dim(2) == 1 ? 0 : 1;
  const int64_t s_n_stride = dim(3) == 1 ? 0 : dim(2);
  ASSIGN_OR_RETURN(Storage x_storage, LayoutAttr(context, "x_layout"));
  ASSIGN_OR_RETURN(Storage y_storage, LayoutAttr(context, "y_layout"));
  ASSIGN_OR_RETURN(Placement px, PlacementOf(context, x, x_storage));
  ASSIGN_OR_RETURN(Placement py, PlacementOf(context, x, y_storage));
  const size_t y_bytes = StoredDesc(x, y_storage, ChainTag(context)).get_size();
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, x)};
  return std::make_unique<ChannelScaleKernel>(x, px, py, y_bytes, s_n_stride, s_c_stride,
                                              std::move(outputs), context.intra_op_threads);
}

}  // namespace

absl::Status RegisterChainKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register(kFusedGlobalAveragePoolOp, &PrepareGlobalAverage));
  return registry->Register(kFusedChannelScaleOp, &PrepareChannelScale);
}

}  // namespace reprise::kernels::cpu
