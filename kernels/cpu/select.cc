// Ops whose output size follows their input values: NonZero, Compress, Unique and
// NonMaxSuppression. They compute at Prepare, from input values known at plan time (a model
// with one of them is planned for its input values, runtime/engine/model.h), and return a
// ConstantKernel; without those values Prepare is UNIMPLEMENTED, naming the input.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

absl::Status NeedsValue(const PrepareContext& context, size_t index, absl::string_view what) {
  if (HasInput(context, index) && context.inputs[index].data == nullptr) {
    return Unimplemented(context, what,
                         " must be known at plan time (the output's size follows its values)");
  }
  return absl::OkStatus();
}

template <typename T>
std::vector<uint8_t> BytesOf(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The flat indices of the elements of `data` (n of type `dtype`, numeric or bool) that are not
// zero, in order. A bool is read as its byte, so that any byte but 0 counts as true.
std::vector<int64_t> NonZeroIndices(DataType dtype, const void* data, int64_t n) {
  std::vector<int64_t> hits;
  DispatchAnyType(dtype, [&]<typename T>() {
    using Stored = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    const Stored* values = static_cast<const Stored*>(data);
    for (int64_t i = 0; i < n; ++i) {
      if (values[i] != Stored{0}) hits.push_back(i);
    }
  });
  return hits;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareNonZero(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(NeedsValue(context, 0, "X"));
  const TensorDesc& x = context.inputs[0];
  if (!DispatchAnyType(x.dtype, []<typename T>() {})) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(x.dtype),
                         " is not supported");
  }
  // A scalar counts as one element of a 1-D tensor, as NumPy's nonzero takes it.
  const Shape shape = x.shape.empty() ? Shape{1} : x.shape;
  const std::vector<int64_t> strides = ContiguousStrides(shape);
  const int64_t n = runtime::NumElements(shape);
  std::vector<int64_t> hits = NonZeroIndices(x.dtype, x.data, n);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t count = static_cast<int64_t>(hits.size());
  if (rank == 1) {
    return std::make_unique<ConstantKernel>(context.op, DataType::kInt64, Shape{1, count},
                                            BytesOf(hits));
  }
  std::vector<int64_t> out(static_cast<size_t>(rank * count));
  for (int64_t h = 0; h < count; ++h) {
    int64_t rest = hits[static_cast<size_t>(h)];
    for (int64_t d = 0; d < rank; ++d) {
      out[static_cast<size_t>(d * count + h)] = rest / strides[d];
      rest %= strides[d];
    }
  }
  return std::make_unique<ConstantKernel>(context.op, DataType::kInt64, Shape{rank, count},
                                          BytesOf(out));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCompress(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kBool}));
  RETURN_IF_ERROR(NeedsValue(context, 0, "input"));
  RETURN_IF_ERROR(NeedsValue(context, 1, "condition"));
  const TensorDesc& x = context.inputs[0];
  const TensorDesc& cond = context.inputs[1];
  if (x.dtype == DataType::kString) {
    return Unimplemented(context, "string tensors are not supported");
  }
  if (cond.shape.size() != 1) {
    return InvalidArgument(context, "condition must be 1-D, got ",
                           runtime::ShapeToString(cond.shape));
  }
  const bool* c = static_cast<const bool*>(cond.data);
  const size_t element = runtime::DataTypeSize(x.dtype);
  const uint8_t* in = static_cast<const uint8_t*>(x.data);
  std::vector<uint8_t> bytes;
  Shape out;
  if (!AttrsOf(context).Has("axis")) {
    const int64_t n = runtime::NumElements(x.shape);
    if (cond.shape[0] > n) {
      return InvalidArgument(context, "condition has ", cond.shape[0], " values for ", n,
                             " elements");
    }
    int64_t kept = 0;
    for (int64_t i = 0; i < cond.shape[0]; ++i) {
      if (!c[i]) continue;
      bytes.insert(bytes.end(), in + i * element, in + (i + 1) * element);
      ++kept;
    }
    out = {kept};
  } else {
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", 0));
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
    const int64_t dim = x.shape[axis];
    if (cond.shape[0] > dim) {
      return InvalidArgument(context, "condition has ", cond.shape[0], " values for an axis of ",
                             dim);
    }
    int64_t outer = 1, inner = static_cast<int64_t>(element);
    for (int64_t i = 0; i < axis; ++i) outer *= x.shape[i];
    for (int64_t i = axis + 1; i < rank; ++i) inner *= x.shape[i];
    int64_t kept = 0;
    for (int64_t i = 0; i < cond.shape[0]; ++i) kept += c[i] ? 1 : 0;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < cond.shape[0]; ++i) {
        if (!c[i]) continue;
        const uint8_t* p = in + (o * dim + i) * inner;
        bytes.insert(bytes.end(), p, p + inner);
      }
    }
    out = x.shape;
    out[axis] = kept;
  }
  return std::make_unique<ConstantKernel>(context.op, x.dtype, std::move(out), std::move(bytes));
}

// Unique over elements (no axis) or over slices along `axis`: Y, the first index of each, the
// index in Y of every input slice, and the counts.
template <typename T>
absl::StatusOr<std::unique_ptr<PreparedKernel>> UniqueOf(const PrepareContext& context, bool sorted,
                                                         bool has_axis, int64_t axis) {
  const TensorDesc& x = context.inputs[0];
  const T* v = static_cast<const T*>(x.data);
  int64_t outer = 1, dim = runtime::NumElements(x.shape), inner = 1;
  if (has_axis) {
    dim = x.shape[axis];
    for (int64_t i = 0; i < axis; ++i) outer *= x.shape[i];
    for (size_t i = static_cast<size_t>(axis) + 1; i < x.shape.size(); ++i) inner *= x.shape[i];
  }
  // A strict weak order on values: NaNs equal one another and follow every number.
  auto before = [](T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
    }
    return a < b;
  };
  // Slice s is the values v[(o * dim + s) * inner + k] for every o, k.
  auto less = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < inner; ++k) {
        const T va = v[(o * dim + a) * inner + k], vb = v[(o * dim + b) * inner + k];
        if (before(va, vb)) return true;
        if (before(vb, va)) return false;
      }
    }
    return false;
  };
  std::vector<int64_t> order(static_cast<size_t>(dim));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);
  // Groups of equal slices in sorted order; each group's first member is its first occurrence
  // (stable sort).
  std::vector<int64_t> group_of(static_cast<size_t>(dim));
  std::vector<int64_t> firsts, counts;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || less(order[i - 1], order[i])) {
      firsts.push_back(order[i]);
      counts.push_back(0);
    }
    group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(firsts.size()) - 1;
    ++counts.back();
  }
  // Output order: sorted groups, or groups by first occurrence.
  std::vector<int64_t> rank_of(firsts.size());
  std::iota(rank_of.begin(), rank_of.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(firsts.size());
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return firsts[a] < firsts[b]; });
    for (size_t r = 0; r < by_first.size(); ++r) rank_of[by_first[r]] = static_cast<int64_t>(r);
  }
  const int64_t k = static_cast<int64_t>(firsts.size());
  std::vector<int64_t> indices(static_cast<size_t>(k)), out_counts(static_cast<size_t>(k));
  for (int64_t g = 0; g < k; ++g) {
    indices[rank_of[g]] = firsts[g];
    out_counts[rank_of[g]] = counts[g];
  }
  std::vector<int64_t> inverse(static_cast<size_t>(dim));
  for (int64_t s = 0; s < dim; ++s) inverse[s] = rank_of[group_of[s]];
  std::vector<T> y(static_cast<size_t>(outer * k * inner));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t e = 0; e < inner; ++e) {
        y[(o * k + r) * inner + e] = v[(o * dim + indices[r]) * inner + e];
      }
    }
  }
  Shape y_shape = {k};
  if (has_axis) {
    y_shape = x.shape;
    y_shape[axis] = k;
  }
  std::vector<ConstantOutput> outputs;
  outputs.push_back({x.dtype, y_shape, BytesOf(y)});
  outputs.push_back({DataType::kInt64, {k}, BytesOf(indices)});
  outputs.push_back({DataType::kInt64, {dim}, BytesOf(inverse)});
  outputs.push_back({DataType::kInt64, {k}, BytesOf(out_counts)});
  outputs.resize(static_cast<size_t>(std::clamp(context.num_outputs, 1, 4)));
  return std::make_unique<ConstantKernel>(context.op, std::move(outputs));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareUnique(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(NeedsValue(context, 0, "X"));
  ASSIGN_OR_RETURN(int64_t sorted, AttrsOf(context).GetInt("sorted", 1));
  const bool has_axis = AttrsOf(context).Has("axis");
  int64_t axis = 0;
  if (has_axis) {
    ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", 0));
    ASSIGN_OR_RETURN(axis, NormalizeAxis(context, axis_attr,
                                         static_cast<int64_t>(context.inputs[0].shape.size())));
  }
  absl::StatusOr<std::unique_ptr<PreparedKernel>> kernel =
      Unimplemented(context, "element type ", runtime::DataTypeName(context.inputs[0].dtype),
                    " is not supported");
  DispatchNumeric(context.inputs[0].dtype, [&]<typename T>() {
    kernel = UniqueOf<T>(context, sorted != 0, has_axis, axis);
  });
  return kernel;
}

// The boxes of one batch as corners and areas, in double, computed once per box: structure of
// arrays, so that one candidate's overlaps with many kept boxes run in vector lanes. A box is
// given as corners (any corner order) or as centre and size.
struct NmsBoxes {
  std::vector<double> y1, x1, y2, x2, area;

  void Append(const float* p, bool center) {
    double by1, bx1, by2, bx2;
    if (center) {  // [x_center, y_center, width, height]
      bx1 = p[0] - p[2] / 2.0;
      bx2 = p[0] + p[2] / 2.0;
      by1 = p[1] - p[3] / 2.0;
      by2 = p[1] + p[3] / 2.0;
    } else {  // [y1, x1, y2, x2], either diagonal
      by1 = std::min(p[0], p[2]);
      by2 = std::max(p[0], p[2]);
      bx1 = std::min(p[1], p[3]);
      bx2 = std::max(p[1], p[3]);
    }
    y1.push_back(by1);
    x1.push_back(bx1);
    y2.push_back(by2);
    x2.push_back(bx2);
    area.push_back((by2 - by1) * (bx2 - bx1));
  }
  void Clear() {
    for (std::vector<double>* v : {&y1, &x1, &y2, &x2, &area}) v->clear();
  }
  void AppendFrom(const NmsBoxes& from, size_t i) {
    y1.push_back(from.y1[i]);
    x1.push_back(from.x1[i]);
    y2.push_back(from.y2[i]);
    x2.push_back(from.x2[i]);
    area.push_back(from.area[i]);
  }
};

// The min and max of two doubles by value: std::min and std::max return references, which keep
// GCC from vectorising the overlap loop below.
__attribute__((always_inline)) inline double MinOf(double a, double b) { return b < a ? b : a; }
__attribute__((always_inline)) inline double MaxOf(double a, double b) { return a < b ? b : a; }

// A candidate box (corners and area > 0) and the kept boxes [begin, end) it is checked against.
struct OverlapRun {
  double y1, x1, y2, x2, area, threshold;
  bool zero_over;  // 0 > threshold: whether a pair without area counts as overlapping
  const double *ky1, *kx1, *ky2, *kx2, *karea;
  size_t begin, end;
};

// True when the candidate's intersection over union with any kept box of the run is above the
// threshold (0 where the kept box has no area). Without a branch (the division made for every
// pair and then selected; a 64-bit flag per lane), so that GCC vectorises it; the same IEEE
// operations in each lane as in the scalar form, so every copy decides alike.
__attribute__((always_inline)) inline bool OverlapBody(const OverlapRun& r) {
  int64_t any = 0;
  for (size_t j = r.begin; j < r.end; ++j) {
    const double ih = MaxOf(0.0, MinOf(r.y2, r.ky2[j]) - MaxOf(r.y1, r.ky1[j]));
    const double iw = MaxOf(0.0, MinOf(r.x2, r.kx2[j]) - MaxOf(r.x1, r.kx1[j]));
    const double inter = ih * iw;
    const double iou = inter / (r.area + r.karea[j] - inter);
    const int64_t has_area = r.karea[j] > 0;
    any |= (has_area & static_cast<int64_t>(iou > r.threshold)) |
           ((1 - has_area) & static_cast<int64_t>(r.zero_over));
  }
  return any != 0;
}
__attribute__((target("avx512f"))) bool OverlapAvx512(const OverlapRun& r) {
  return OverlapBody(r);
}
__attribute__((target("avx2,fma"))) bool OverlapAvx2(const OverlapRun& r) { return OverlapBody(r); }
bool OverlapBaseline(const OverlapRun& r) { return OverlapBody(r); }

// True when box i of `all` overlaps any of `kept` with an intersection over union above
// `threshold`, the overlap counted as 0 where either box has no area (as it always was), in
// runs of kOverlapRun kept boxes.
bool OverlapsKept(const NmsBoxes& all, size_t i, const NmsBoxes& kept, double threshold) {
  static const auto overlap = PickForThisCpu(&OverlapAvx512, &OverlapAvx2, &OverlapBaseline);
  constexpr size_t kOverlapRun = 64;
  const size_t count = kept.area.size();
  const bool zero_over = 0.0 > threshold;
  if (!(all.area[i] > 0)) return count > 0 && zero_over;
  OverlapRun run{all.y1[i],
                 all.x1[i],
                 all.y2[i],
                 all.x2[i],
                 all.area[i],
                 threshold,
                 zero_over,
                 kept.y1.data(),
                 kept.x1.data(),
                 kept.y2.data(),
                 kept.x2.data(),
                 kept.area.data(),
                 0,
                 0};
  for (run.begin = 0; run.begin < count; run.begin += kOverlapRun) {
    run.end = std::min(count, run.begin + kOverlapRun);
    if (overlap(run)) return true;
  }
  return false;
}

// NonMaxSuppression: per batch and class, boxes above score_threshold by decreasing score
// (ties by index), each kept unless its IoU with a kept box exceeds iou_threshold, at most
// max_output_boxes_per_class; rows [batch, class, box].
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareNms(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 5));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kFloat32}));
  RETURN_IF_ERROR(NeedsValue(context, 0, "boxes"));
  RETURN_IF_ERROR(NeedsValue(context, 1, "scores"));
  const Shape& boxes = context.inputs[0].shape;
  const Shape& scores = context.inputs[1].shape;
  if (boxes.size() != 3 || boxes[2] != 4 || scores.size() != 3 || scores[0] != boxes[0] ||
      scores[2] != boxes[1]) {
    return InvalidArgument(context, "boxes must be [B, N, 4] and scores [B, C, N], got ",
                           runtime::ShapeToString(boxes), " and ", runtime::ShapeToString(scores));
  }
  int64_t max_per_class = 0;
  double iou_threshold = 0, score_threshold = -INFINITY;
  if (HasInput(context, 2)) {
    RETURN_IF_ERROR(NeedsValue(context, 2, "max_output_boxes_per_class"));
    ASSIGN_OR_RETURN(double v, ReadScalar(context, 2, "max_output_boxes_per_class"));
    max_per_class = v > 0 ? static_cast<int64_t>(std::min(v, 1e15)) : 0;
  }
  if (HasInput(context, 3)) {
    ASSIGN_OR_RETURN(iou_threshold, ReadScalar(context, 3, "iou_threshold"));
  }
  if (HasInput(context, 4)) {
    ASSIGN_OR_RETURN(score_threshold, ReadScalar(context, 4, "score_threshold"));
  }
  ASSIGN_OR_RETURN(int64_t center, AttrsOf(context).GetInt("center_point_box", 0));
  if (center != 0 && center != 1) {
    return InvalidArgument(context, "center_point_box must be 0 or 1, got ", center);
  }
  const float* box = static_cast<const float*>(context.inputs[0].data);
  const float* score = static_cast<const float*>(context.inputs[1].data);
  const int64_t batches = boxes[0], n = boxes[1], classes = scores[1];
  std::vector<int64_t> selected;
  std::vector<int64_t> order;
  NmsBoxes all, kept;
  for (int64_t b = 0; b < batches; ++b) {
    all.Clear();
    for (int64_t i = 0; i < n; ++i) all.Append(box + (b * n + i) * 4, center == 1);
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = score + (b * classes + c) * n;
      order.clear();
      for (int64_t i = 0; i < n; ++i) {
        if (s[i] > score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [s](int64_t x, int64_t y) { return s[x] > s[y]; });
      kept.Clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.area.size()) >= max_per_class) break;
        if (OverlapsKept(all, static_cast<size_t>(i), kept, iou_threshold)) continue;
        kept.AppendFrom(all, static_cast<size_t>(i));
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  const int64_t rows = static_cast<int64_t>(selected.size() / 3);
  return std::make_unique<ConstantKernel>(context.op, DataType::kInt64, Shape{rows, 3},
                                          BytesOf(selected));
}

}  // namespace

absl::Status RegisterSelectKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("NonZero", &PrepareNonZero));
  RETURN_IF_ERROR(registry->Register("Compress", &PrepareCompress));
  RETURN_IF_ERROR(registry->Register("Unique", &PrepareUnique));
  RETURN_IF_ERROR(registry->Register("NonMaxSuppression", &PrepareNms));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
