// RNN, GRU and LSTM against a reference written from the ONNX operator spec (one entry and one
// step at a time, in double): both layouts, every direction, sequence_lens, initial states,
// biases, peepholes, input_forget, linear_before_reset, clip and non-default activations, and
// shapes whose input products span several chunks of steps.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

struct Act {
  std::string name = "Tanh";
  float alpha = 0, beta = 0;
  double operator()(double x) const {
    if (name == "Sigmoid") return 1 / (1 + std::exp(-x));
    if (name == "Tanh") return std::tanh(x);
    if (name == "Relu") return std::max(x, 0.0);
    if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
    if (name == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
    ADD_FAILURE() << "no reference for " << name;
    return 0;
  }
};

struct Case {
  std::string op = "LSTM";
  int64_t seq = 4, batch = 2, input = 3, hidden = 5;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, lens = false, h0 = false, c0 = false, peep = false;
  bool input_forget = false, linear_before_reset = false;
  float clip = 0;
  std::vector<Act> acts;  // empty: the spec's defaults
};

int Gates(const Case& c) { return c.op == "RNN" ? 1 : c.op == "GRU" ? 3 : 4; }
int64_t Dirs(const Case& c) { return c.direction == "bidirectional" ? 2 : 1; }

std::vector<Act> ActsOf(const Case& c) {
  if (!c.acts.empty()) return c.acts;
  std::vector<Act> one;
  if (c.op == "RNN") one = {{"Tanh"}};
  if (c.op == "GRU") one = {{"Sigmoid"}, {"Tanh"}};
  if (c.op == "LSTM") one = {{"Sigmoid"}, {"Tanh"}, {"Tanh"}};
  std::vector<Act> all = one;
  if (Dirs(c) == 2) all.insert(all.end(), one.begin(), one.end());
  return all;
}

struct Inputs {
  std::vector<float> x, w, r, b, h0, c0, p;
  std::vector<int32_t> lens;
};

Inputs MakeInputs(const Case& c) {
  const int64_t dirs = Dirs(c), gh = Gates(c) * c.hidden;
  const float scale = 1.5f / std::sqrt(static_cast<float>(c.hidden + c.input));
  Inputs in;
  in.x = RandomFloats(c.seq * c.batch * c.input, 11);
  in.w = RandomFloats(dirs * gh * c.input, 12, -scale, scale);
  in.r = RandomFloats(dirs * gh * c.hidden, 13, -scale, scale);
  in.b = RandomFloats(dirs * 2 * gh, 14, -0.5f, 0.5f);
  in.h0 = RandomFloats(dirs * c.batch * c.hidden, 15);
  in.c0 = RandomFloats(dirs * c.batch * c.hidden, 16);
  in.p = RandomFloats(dirs * 3 * c.hidden, 17, -0.5f, 0.5f);
  for (int64_t b = 0; b < c.batch; ++b) {
    in.lens.push_back(static_cast<int32_t>((b * 7 + 3) % (c.seq + 1)));  // 0 and seq included
  }
  if (c.batch > 1) in.lens[1] = static_cast<int32_t>(c.seq);
  return in;
}

// Y, Y_h (, Y_c) by the spec's equations.
std::vector<std::vector<double>> Reference(const Case& c, const Inputs& in) {
  const int64_t dirs = Dirs(c), H = c.hidden, G = Gates(c), GH = G * H;
  const std::vector<Act> acts = ActsOf(c);
  const size_t per_dir = c.op == "RNN" ? 1 : c.op == "GRU" ? 2 : 3;
  std::vector<double> y(c.seq * dirs * c.batch * H, 0.0), yh(dirs * c.batch * H),
      yc(dirs * c.batch * H);
  auto clip = [&](double v) { return c.clip > 0 ? std::clamp<double>(v, -c.clip, c.clip) : v; };
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = c.direction == "reverse" || d == 1;
    const Act& f = acts[d * per_dir];
    const Act& g = acts[std::min(d * per_dir + 1, acts.size() - 1)];
    const Act& ha = acts[std::min(d * per_dir + 2, acts.size() - 1)];
    auto W = [&](int64_t row, int64_t k) { return in.w[(d * GH + row) * c.input + k]; };
    auto R = [&](int64_t row, int64_t k) { return in.r[(d * GH + row) * H + k]; };
    auto Wb = [&](int64_t row) { return c.bias ? in.b[d * 2 * GH + row] : 0.0; };
    auto Rb = [&](int64_t row) { return c.bias ? in.b[d * 2 * GH + GH + row] : 0.0; };
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t state = c.layout == 1 ? (b * dirs + d) * H : (d * c.batch + b) * H;
      std::vector<double> h(H), cs(H);
      for (int64_t k = 0; k < H; ++k) {
        h[k] = c.h0 ? in.h0[state + k] : 0.0;
        cs[k] = c.c0 ? in.c0[state + k] : 0.0;
      }
      const int64_t len = c.lens ? in.lens[b] : c.seq;
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        const float* xt =
            in.x.data() + (c.layout == 1 ? (b * c.seq + t) : (t * c.batch + b)) * c.input;
        auto xw = [&](int64_t row) {
          double s = 0;
          for (int64_t k = 0; k < c.input; ++k) s += W(row, k) * xt[k];
          return s;
        };
        auto hr = [&](int64_t row, const std::vector<double>& v) {
          double s = 0;
          for (int64_t k = 0; k < H; ++k) s += R(row, k) * v[k];
          return s;
        };
        std::vector<double> next(H), next_c(H);
        if (c.op == "RNN") {
          for (int64_t k = 0; k < H; ++k) next[k] = f(clip(xw(k) + hr(k, h) + Wb(k) + Rb(k)));
        } else if (c.op == "GRU") {
          std::vector<double> z(H), rg(H), rh(H);
          for (int64_t k = 0; k < H; ++k) {
            z[k] = f(clip(xw(k) + hr(k, h) + Wb(k) + Rb(k)));
            rg[k] = f(clip(xw(H + k) + hr(H + k, h) + Wb(H + k) + Rb(H + k)));
            rh[k] = rg[k] * h[k];
          }
          for (int64_t k = 0; k < H; ++k) {
            const int64_t row = 2 * H + k;
            const double cand = c.linear_before_reset
                                    ? g(clip(xw(row) + rg[k] * (hr(row, h) + Rb(row)) + Wb(row)))
                                    : g(clip(xw(row) + hr(row, rh) + Rb(row) + Wb(row)));
            next[k] = (1 - z[k]) * cand + z[k] * h[k];
          }
        } else {
          auto P = [&](int64_t row) { return c.peep ? in.p[d * 3 * H + row] : 0.0; };
          for (int64_t k = 0; k < H; ++k) {
            const double i = f(clip(xw(k) + hr(k, h) + P(k) * cs[k] + Wb(k) + Rb(k)));
            const double fg = c.input_forget
                                  ? 1 - i
                                  : f(clip(xw(2 * H + k) + hr(2 * H + k, h) + P(2 * H + k) * cs[k] +
                                           Wb(2 * H + k) + Rb(2 * H + k)));
            const double cc =
                g(clip(xw(3 * H + k) + hr(3 * H + k, h) + Wb(3 * H + k) + Rb(3 * H + k)));
            next_c[k] = fg * cs[k] + i * cc;
            const double o =
                f(clip(xw(H + k) + hr(H + k, h) + P(H + k) * next_c[k] + Wb(H + k) + Rb(H + k)));
            next[k] = o * ha(next_c[k]);
          }
          cs = next_c;
        }
        h = next;
        for (int64_t k = 0; k < H; ++k) {
          const int64_t at =
              c.layout == 1 ? ((b * c.seq + t) * dirs + d) * H : ((t * dirs + d) * c.batch + b) * H;
          y[at + k] = h[k];
        }
      }
      for (int64_t k = 0; k < H; ++k) {
        yh[state + k] = h[k];
        yc[state + k] = cs[k];
      }
    }
  }
  if (c.op == "LSTM") return {y, yh, yc};
  return {y, yh};
}

// `known`: W and R are initializers (the kernel packs them at Prepare), else plain inputs.
absl::StatusOr<std::vector<Tensor>> RunKernel(const Case& c, const Inputs& in, int threads,
                                              bool known) {
  const int64_t dirs = Dirs(c), gh = Gates(c) * c.hidden;
  const Shape xs = c.layout == 1 ? Shape{c.batch, c.seq, c.input} : Shape{c.seq, c.batch, c.input};
  const Shape state =
      c.layout == 1 ? Shape{c.batch, dirs, c.hidden} : Shape{dirs, c.batch, c.hidden};
  std::vector<Tensor> inputs = {
      Tensor::Of<float>(xs, in.x),
      Tensor::Of<float>({dirs, gh, c.input}, in.w, known),
      Tensor::Of<float>({dirs, gh, c.hidden}, in.r, known),
      c.bias ? Tensor::Of<float>({dirs, 2 * gh}, in.b) : Tensor::Absent(),
      c.lens ? Tensor::Of<int32_t>({c.batch}, in.lens) : Tensor::Absent(),
      c.h0 ? Tensor::Of<float>(state, in.h0) : Tensor::Absent(),
  };
  if (c.op == "LSTM") {
    inputs.push_back(c.c0 ? Tensor::Of<float>(state, in.c0) : Tensor::Absent());
    inputs.push_back(c.peep ? Tensor::Of<float>({dirs, 3 * c.hidden}, in.p) : Tensor::Absent());
  }
  runtime::Attributes attrs =
      Attrs({{"hidden_size", c.hidden}, {"direction", c.direction}, {"layout", c.layout}});
  if (c.clip > 0) attrs.Set("clip", c.clip);
  if (c.op == "LSTM") attrs.Set("input_forget", int64_t{c.input_forget});
  if (c.op == "GRU") attrs.Set("linear_before_reset", int64_t{c.linear_before_reset});
  if (!c.acts.empty()) {
    std::vector<std::string> names;
    std::vector<float> alphas, betas;
    for (const Act& a : c.acts) {
      names.push_back(a.name);
      if (a.name == "LeakyRelu" || a.name == "HardSigmoid") alphas.push_back(a.alpha);
      if (a.name == "HardSigmoid") betas.push_back(a.beta);
    }
    attrs.Set("activations", names);
    if (!alphas.empty()) attrs.Set("activation_alpha", alphas);
    if (!betas.empty()) attrs.Set("activation_beta", betas);
  }
  KernelHarness h;
  const int outputs = c.op == "LSTM" ? 3 : 2;
  auto kernel = h.Prepare(c.op, inputs, attrs, 14, outputs, threads);
  if (!kernel.ok()) return kernel.status();
  return h.RunPrepared(**kernel, inputs);
}

void Check(const Case& c) {
  const Inputs in = MakeInputs(c);
  const std::vector<std::vector<double>> want = Reference(c, in);
  for (int threads : {1, 2}) {
    for (bool known : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "threads " << threads << ", weights known " << known);
      auto got = RunKernel(c, in, threads, known);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), want.size());
      for (size_t o = 0; o < want.size(); ++o) {
        const std::vector<float> v = (*got)[o].Values<float>();
        ASSERT_EQ(v.size(), want[o].size()) << "output " << o;
        int bad = 0;
        for (size_t i = 0; i < v.size() && bad < 5; ++i) {
          if (!(std::fabs(v[i] - want[o][i]) <= 2e-5 + 1e-4 * std::fabs(want[o][i]))) {
            ADD_FAILURE() << "output " << o << "[" << i << "] = " << v[i] << ", want "
                          << want[o][i];
            ++bad;
          }
        }
      }
    }
  }
}

TEST(RecurrentTest, LstmBidirectionalWithLengthsStatesAndPeepholes) {
  Case c;
  c.direction = "bidirectional";
  c.batch = 4;
  c.seq = 6;
  c.lens = c.h0 = c.c0 = c.peep = true;
  Check(c);
}

TEST(RecurrentTest, LstmBatchMajorInputForgetAndClip) {
  Case c;
  c.layout = 1;
  c.batch = 3;
  c.input_forget = true;
  c.clip = 0.4f;
  c.h0 = true;
  Check(c);
  c.direction = "reverse";
  c.lens = true;
  Check(c);
}

TEST(RecurrentTest, LstmWithoutBiasAndOtherActivations) {
  Case c;
  c.bias = false;
  c.direction = "reverse";
  c.acts = {{"HardSigmoid", 0.3f, 0.4f}, {"Relu"}, {"Tanh"}};
  Check(c);
}

TEST(RecurrentTest, GruBothResetFormsEveryDirectionAndLayout) {
  for (bool lbr : {false, true}) {
    for (const char* direction : {"forward", "reverse", "bidirectional"}) {
      for (int64_t layout : {0, 1}) {
        SCOPED_TRACE(::testing::Message()
                     << "lbr " << lbr << " " << direction << " layout " << layout);
        Case c;
        c.op = "GRU";
        c.linear_before_reset = lbr;
        c.direction = direction;
        c.layout = layout;
        c.batch = 3;
        c.lens = c.h0 = true;
        Check(c);
      }
    }
  }
}

TEST(RecurrentTest, RnnWithLeakyReluAndClip) {
  Case c;
  c.op = "RNN";
  c.direction = "bidirectional";
  c.acts = {{"LeakyRelu", 0.1f}, {"Tanh"}};
  c.clip = 0.8f;
  c.lens = true;
  c.batch = 3;
  Check(c);
}

// Input products for many steps and entries are computed a chunk of steps at a time; these
// shapes take several chunks (32, 32 and 6 steps for LSTM), with one product for all entries and
// with one per entry, and with their steps split over the hidden units or their directions run
// at once (two threads). With known weights, the whole and the last chunk's input products and
// the state products (GRU: z and r's, then the candidate's) read them packed.
// A case of these sizes (the rest as Case has them).
Case Sized(int64_t batch, int64_t seq, int64_t input, int64_t hidden) {
  Case c;
  c.batch = batch;
  c.seq = seq;
  c.input = input;
  c.hidden = hidden;
  return c;
}

TEST(RecurrentTest, LongSequencesSpanSeveralChunks) {
  Case c = Sized(8, 70, 24, 256);
  c.h0 = c.c0 = true;
  Check(c);
  c.direction = "reverse";
  Check(c);
  c.lens = true;
  Check(c);
  c.op = "GRU";
  c.layout = 1;
  c.lens = false;
  c.direction = "bidirectional";  // at two threads, the directions run at once
  Check(c);
  c.layout = 0;
  Check(c);
  c.linear_before_reset = true;
  Check(c);
}

// One entry at two threads: a GRU step of 256 units is too small to split over them, so each
// step's state product runs on the product's two threads (the row kernel's with known weights,
// else sgemm's) and its gates on one; an LSTM step of 512 units is split over the units. Both
// against the reference, as at one thread.
TEST(RecurrentTest, OneEntryStepsUseTheThreads) {
  Case c = Sized(1, 12, 40, 256);
  c.op = "GRU";
  Check(c);
  c.linear_before_reset = true;
  Check(c);
  c.op = "LSTM";
  c.hidden = 512;
  c.h0 = c.c0 = true;
  Check(c);
}

// One entry with R of 2^17 weights or more: with known weights, each whole step's state product
// of 2^17 weights or more runs on our row kernel (one row), into its columns of the gates' sums
// (rows G*H apart): an LSTM of 256 units both ways; a GRU of 512 whose z and r product (1024
// columns) and candidate product (512) each write part of a row; a GRU of 256 with one product
// for all three gates (768 columns), and with two, z and r's on the row kernel (512 columns)
// and the candidate's (256 x 256 weights) on sgemm.
TEST(RecurrentTest, OneEntryStateProductsOnTheRowKernel) {
  Case c = Sized(1, 12, 40, 256);
  c.direction = "bidirectional";
  c.h0 = c.c0 = true;
  Check(c);
  c = Sized(1, 12, 40, 512);
  c.op = "GRU";
  c.h0 = true;
  Check(c);
  c = Sized(1, 12, 40, 256);
  c.op = "GRU";
  c.h0 = true;
  c.linear_before_reset = true;
  Check(c);
  c.linear_before_reset = false;
  c.direction = "reverse";
  Check(c);
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
