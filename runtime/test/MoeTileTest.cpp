//===- MoeTileTest.cpp - the tensor-core tile's addressing, emulated ------===//
//
// The grouped products' tensor-core kernel (cuda/MoeKernels.cu) places
// operand tiles in shared memory and reads mma fragments through the
// functions of cuda/MoeTile.h. Here a block's work for one 64-deep stage
// runs on the CPU: the tiles are filled chunk by chunk as its cp.async
// copies do, every lane's ldmatrix.x4 (plain or .trans) and every
// mma.m16n8k16 are emulated by PTX's fragment layouts, and the
// accumulators land where the kernel's epilogue writes them. For each
// operand layout the kernel uses (A stored [m][k] or [k][m], B [n][k] or
// [k][n]) the result must be the product exactly (small integers), and
// each ldmatrix's 8 rows must fall in distinct 16-byte bank groups.
//
//===----------------------------------------------------------------------===//
#include "MoeTile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <random>
#include <set>
#include <vector>

using namespace dcrt::cuda::moe::tile;

namespace {

/// A lane's 4 registers of two 16-bit values each.
using Registers = float[32][4][2];

/// ldmatrix.sync.aligned.m8n8.x4(.trans).b16: lanes 8 m .. 8 m + 7 address
/// the rows of matrix m; lane l gets, of each matrix, row l / 4 elements
/// 2 (l % 4) and 2 (l % 4) + 1, or with .trans column l / 4 rows 2 (l % 4)
/// and 2 (l % 4) + 1.
void ldmatrix(const std::vector<float> &shared, const int (&address)[32],
              bool transpose, Registers &out) {
  for (int m = 0; m < 4; ++m) {
    float matrix[8][8];
    std::set<int> bankGroups;
    for (int row = 0; row < 8; ++row) {
      int at = address[8 * m + row];
      ASSERT_EQ(at % 8, 0) << "an ldmatrix row must be 16-byte aligned";
      bankGroups.insert(at / 8 % 8);
      for (int col = 0; col < 8; ++col)
        matrix[row][col] = shared.at(static_cast<size_t>(at + col));
    }
    EXPECT_EQ(bankGroups.size(), 8u) << "ldmatrix rows share banks";
    for (int lane = 0; lane < 32; ++lane) {
      int g = lane / 4, t = lane % 4;
      for (int h = 0; h < 2; ++h)
        out[lane][m][h] =
            transpose ? matrix[2 * t + h][g] : matrix[g][2 * t + h];
    }
  }
}

/// mma.sync.aligned.m16n8k16.row.col.f32: A's registers a0..a3 hold rows
/// g and g + 8 (a0, a1) at depths 2t, 2t + 1, then the same 8 further
/// (a2, a3); B's b0, b1 depths 2t, 2t + 1 and 2t + 8, 2t + 9 of column g;
/// C's c0, c1 row g, columns 2t, 2t + 1, c2, c3 row g + 8.
void mma(const Registers &a, const float (&b)[32][2][2], float (&c)[32][4]) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = a[lane][0][h];
      A[g + 8][2 * t + h] = a[lane][1][h];
      A[g][2 * t + 8 + h] = a[lane][2][h];
      A[g + 8][2 * t + 8 + h] = a[lane][3][h];
      B[2 * t + h][g] = b[lane][0][h];
      B[2 * t + 8 + h][g] = b[lane][1][h];
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    int g = lane / 4, t = lane % 4;
    for (int q = 0; q < 4; ++q) {
      int row = g + (q >= 2 ? 8 : 0), col = 2 * t + q % 2;
      float sum = 0;
      for (int k = 0; k < 16; ++k)
        sum += A[row][k] * B[k][col];
      c[lane][q] += sum;
    }
  }
}

/// Fills a shared tile of COLS columns chunk by chunk (the copy order):
/// element (r, c) of the tile is value(r, c).
template <int COLS, typename Value>
std::vector<float> fillTile(int rows, Value value) {
  std::vector<float> shared(static_cast<size_t>(rows * COLS), 1000);
  for (int i = 0; i < rows * COLS / 8; ++i) {
    Cell cell = chunkCell<COLS>(i);
    for (int e = 0; e < 8; ++e)
      shared[static_cast<size_t>(swizzled<COLS>(cell.r, cell.c) + e)] =
          value(cell.r, cell.c + e);
  }
  return shared;
}

template <bool A_ALONG_M, bool B_ALONG_N> void checkLayout() {
  std::mt19937 rng(A_ALONG_M * 2 + B_ALONG_N);
  std::uniform_int_distribution<int> small(-3, 3);
  // The product's operands: A is M x K, B is K x N.
  std::vector<float> a(kTileM * kTileK), b(kTileK * kTileN);
  for (float &x : a)
    x = static_cast<float>(small(rng));
  for (float &x : b)
    x = static_cast<float>(small(rng));
  auto A = [&](int m, int k) { return a[static_cast<size_t>(m * kTileK + k)]; };
  auto B = [&](int k, int n) { return b[static_cast<size_t>(k * kTileN + n)]; };
  constexpr int aCols = A_ALONG_M ? kTileM : kTileK;
  constexpr int bCols = B_ALONG_N ? kTileN : kTileK;
  std::vector<float> sharedA =
      A_ALONG_M
          ? fillTile<aCols>(kTileK, [&](int k, int m) { return A(m, k); })
          : fillTile<aCols>(kTileM, [&](int m, int k) { return A(m, k); });
  std::vector<float> sharedB =
      B_ALONG_N
          ? fillTile<bCols>(kTileK, [&](int k, int n) { return B(k, n); })
          : fillTile<bCols>(kTileN, [&](int n, int k) { return B(k, n); });
  for (float x : sharedA)
    ASSERT_NE(x, 1000.0f) << "a shared element of A was never written";

  std::vector<float> out(kTileM * kTileN, NAN);
  for (int warp = 0; warp < kThreads / 32; ++warp) {
    static float acc[4][8][32][4];
    for (auto &m : acc)
      for (auto &n : m)
        for (auto &l : n)
          for (float &x : l)
            x = 0;
    for (int kk = 0; kk < kTileK; kk += 16) {
      static Registers fa[4];
      static float fb[8][32][2][2];
      for (int mi = 0; mi < 4; ++mi) {
        int address[32];
        for (int lane = 0; lane < 32; ++lane) {
          Cell cell = aFragmentCell<A_ALONG_M>(lane, warpRow(warp), mi, kk);
          address[lane] = swizzled<aCols>(cell.r, cell.c);
        }
        ldmatrix(sharedA, address, A_ALONG_M, fa[mi]);
      }
      for (int nj = 0; nj < 4; ++nj) {
        int address[32];
        for (int lane = 0; lane < 32; ++lane) {
          Cell cell = bFragmentCell<B_ALONG_N>(lane, warpCol(warp), nj, kk);
          address[lane] = swizzled<bCols>(cell.r, cell.c);
        }
        Registers r;
        ldmatrix(sharedB, address, B_ALONG_N, r);
        for (int lane = 0; lane < 32; ++lane)
          for (int h = 0; h < 2; ++h) {
            fb[2 * nj][lane][0][h] = r[lane][0][h];
            fb[2 * nj][lane][1][h] = r[lane][1][h];
            fb[2 * nj + 1][lane][0][h] = r[lane][2][h];
            fb[2 * nj + 1][lane][1][h] = r[lane][3][h];
          }
      }
      for (int mi = 0; mi < 4; ++mi)
        for (int ni = 0; ni < 8; ++ni)
          mma(fa[mi], fb[ni], acc[mi][ni]);
    }
    for (int mi = 0; mi < 4; ++mi)
      for (int ni = 0; ni < 8; ++ni)
        for (int lane = 0; lane < 32; ++lane)
          for (int half = 0; half < 2; ++half) {
            Cell cell = accumulatorCell(lane, warpRow(warp), warpCol(warp), mi,
                                        ni, half);
            for (int h = 0; h < 2; ++h) {
              float &slot =
                  out[static_cast<size_t>(cell.r * kTileN + cell.c + h)];
              ASSERT_TRUE(std::isnan(slot)) << "an output written twice";
              slot = acc[mi][ni][lane][2 * half + h];
            }
          }
  }
  for (int m = 0; m < kTileM; ++m)
    for (int n = 0; n < kTileN; ++n) {
      float want = 0;
      for (int k = 0; k < kTileK; ++k)
        want += A(m, k) * B(k, n);
      ASSERT_EQ(out[static_cast<size_t>(m * kTileN + n)], want)
          << "output (" << m << ", " << n << ")";
    }
}

} // namespace

TEST(MoeTile, ATransposedWeight) { checkLayout<false, false>(); }
TEST(MoeTile, AnUntransposedWeight) { checkLayout<false, true>(); }
TEST(MoeTile, TheWeightGradient) { checkLayout<true, true>(); }
TEST(MoeTile, AAlongMWithBAlongK) { checkLayout<true, false>(); }

TEST(MoeTile, CopiesCoverEachTileOnce) {
  for (int cols : {kTileK, kTileM}) {
    int rows = kTileElements / cols;
    std::vector<int> hits(kTileElements, 0);
    for (int i = 0; i < kTileElements / 8; ++i) {
      Cell cell = cols == kTileK ? chunkCell<kTileK>(i) : chunkCell<kTileM>(i);
      ASSERT_LT(cell.r, rows);
      for (int e = 0; e < 8; ++e)
        ++hits[static_cast<size_t>(cols == kTileK
                                       ? swizzled<kTileK>(cell.r, cell.c + e)
                                       : swizzled<kTileM>(cell.r, cell.c + e))];
    }
    for (int h : hits)
      ASSERT_EQ(h, 1);
  }
}

//===----------------------------------------------------------------------===//
// The Hopper kernel's shared tiles, read as wgmma's descriptors say
//===----------------------------------------------------------------------===//

namespace {

namespace wg = dcrt::cuda::moe::tile::wgmma;

/// The shared byte wgmma reads for element (mn, k) of an operand described
/// by `d` (16-bit elements: T = 8), by PTX's canonical layouts with
/// 128-byte swizzling: K-major ((8,m),(T,2k)):((8T,SBO),(1,T)), MN-major
/// ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)), in elements, then Swizzle<3,4,3>
/// on the byte address (the tile 1024-byte aligned).
int canonicalByte(bool mnMajor, const wg::Descriptor &d, int mn, int k) {
  int offset =
      mnMajor ? mn % 8 + mn / 8 % 8 * 8 + mn / 64 * (d.leadingBytes / 2) +
                    k % 8 * 64 + k / 8 * (d.strideBytes / 2)
              : mn % 8 * 64 + mn / 8 * (d.strideBytes / 2) + k % 8 + k / 8 * 8;
  int address = 2 * (d.start + offset);
  return address ^ (((address >> 7) & 7) << 4);
}

/// A tile of `mn` x 64 (k) elements value(mn, k) filled as the kernel's
/// copies fill it: K-major from rows of k, MN-major from rows of mn.
template <int MN, typename Value>
std::vector<float> fillHopperTile(bool mnMajor, Value value) {
  std::vector<float> shared(MN * 64, 1000);
  std::vector<int> writes(MN * 64, 0);
  for (int i = 0; i < MN * 64 / 8; ++i) {
    Cell cell = mnMajor ? wg::chunkCell<MN>(i) : wg::chunkCell<64>(i);
    for (int e = 0; e < 8; ++e) {
      int at = mnMajor ? wg::mnMajorOffset(cell.r, cell.c + e)
                       : swizzled<64>(cell.r, cell.c + e);
      shared.at(static_cast<size_t>(at)) =
          mnMajor ? value(cell.c + e, cell.r) : value(cell.r, cell.c + e);
      ++writes[static_cast<size_t>(at)];
    }
  }
  for (int w : writes)
    EXPECT_EQ(w, 1) << "a shared element written " << w << " times";
  return shared;
}

/// The same tile filled as the TMA kernel (MoeWgmmaTma.cu) loads it:
/// boxes of 64 elements (128 bytes) by rows, byte b of box row r at
/// r * 128 + b, then TMA's 128-byte swizzle on the address (the 16-byte
/// chunk bits 4-6 XOR bits 7-9; the tile 1024-byte aligned). K-major: one
/// box of MN rows (of k); MN-major: MN / 64 boxes of 64 k-rows, box j (mn
/// 64 j ...) at element j * kBlockElements.
template <int MN, typename Value>
std::vector<float> fillTmaTile(bool mnMajor, Value value) {
  std::vector<float> shared(MN * 64, 1000);
  std::vector<int> writes(MN * 64, 0);
  const int boxes = mnMajor ? MN / 64 : 1, rows = mnMajor ? 64 : MN;
  for (int box = 0; box < boxes; ++box)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < 64; ++c) {
        int byte = box * wg::kBlockBytes + r * 128 + c * 2;
        byte ^= ((byte >> 7) & 7) << 4;
        const auto at = static_cast<size_t>(byte / 2);
        shared.at(at) = mnMajor ? value(box * 64 + c, r) : value(r, c);
        ++writes[at];
      }
  for (int w : writes)
    EXPECT_EQ(w, 1) << "a shared element written " << w << " times";
  return shared;
}

/// Every element each warpgroup's wgmmas read, for tiles filled by the
/// cp.async kernel's copies or (`tma`) the TMA kernel's boxes.
void checkHopperLayouts(bool aMnMajor, bool bMnMajor, bool tma = false) {
  auto A = [](int m, int k) { return static_cast<float>(m * 64 + k); };
  auto B = [](int n, int k) { return static_cast<float>(n * 64 + k); };
  std::vector<float> tileA = tma ? fillTmaTile<wg::kTileM>(aMnMajor, A)
                                 : fillHopperTile<wg::kTileM>(aMnMajor, A);
  std::vector<float> tileB = tma ? fillTmaTile<wg::kTileN>(bMnMajor, B)
                                 : fillHopperTile<wg::kTileN>(bMnMajor, B);
  for (int step = 0; step < wg::kTileK / 16; ++step) {
    for (int group = 0; group < 2; ++group) {
      wg::Descriptor d = aMnMajor ? wg::mnMajorDescriptor(group, step)
                                  : wg::kMajorDescriptor(group * 64, step);
      ASSERT_EQ(d.start % 8, 0)
          << "a descriptor's start must be 16-byte aligned";
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k)
          ASSERT_EQ(
              tileA[static_cast<size_t>(canonicalByte(aMnMajor, d, m, k) / 2)],
              A(group * 64 + m, step * 16 + k))
              << "A (m " << group * 64 + m << ", k " << step * 16 + k << ")";
    }
    wg::Descriptor d = bMnMajor ? wg::mnMajorDescriptor(0, step)
                                : wg::kMajorDescriptor(0, step);
    for (int n = 0; n < wg::kTileN; ++n)
      for (int k = 0; k < 16; ++k)
        ASSERT_EQ(
            tileB[static_cast<size_t>(canonicalByte(bMnMajor, d, n, k) / 2)],
            B(n, step * 16 + k))
            << "B (n " << n << ", k " << step * 16 + k << ")";
  }
}

} // namespace

TEST(MoeTile, HopperTilesOfATransposedWeight) {
  checkHopperLayouts(false, false);
}
TEST(MoeTile, HopperTilesOfAnUntransposedWeight) {
  checkHopperLayouts(false, true);
}
TEST(MoeTile, HopperTilesOfTheWeightGradient) {
  checkHopperLayouts(true, true);
}
TEST(MoeTile, TmaBoxesOfATransposedWeight) {
  checkHopperLayouts(false, false, true);
}
TEST(MoeTile, TmaBoxesOfAnUntransposedWeight) {
  checkHopperLayouts(false, true, true);
}

TEST(MoeTile, TmaBoxesOfTheWeightGradient) {
  checkHopperLayouts(true, true, true);
}

/// The weight gradient's TMA kernel zeroes the k rows >= valid of its
/// stage (A's MN-major tile, then B's) by chunk, as mnMajorChunkRow says:
/// wgmma then reads zeros at exactly the depths >= valid, in both
/// operands, and the loaded values below.
TEST(MoeTile, ZeroingAStagesRowsPastAnExpertsEnd) {
  auto A = [](int m, int k) { return static_cast<float>(1 + m * 64 + k); };
  auto B = [](int n, int k) { return static_cast<float>(1 + n * 64 + k); };
  for (int valid = 1; valid <= wg::kTileK; ++valid) {
    std::vector<float> stage = fillTmaTile<wg::kTileM>(true, A);
    std::vector<float> tileB = fillTmaTile<wg::kTileN>(true, B);
    stage.insert(stage.end(), tileB.begin(), tileB.end());
    ASSERT_EQ(stage.size(),
              static_cast<size_t>(wg::kATileElements + wg::kBTileElements));
    for (size_t chunk = 0; chunk < stage.size() / 8; ++chunk)
      if (wg::mnMajorChunkRow(static_cast<int>(chunk)) >= valid)
        std::fill_n(stage.begin() + static_cast<std::ptrdiff_t>(chunk * 8), 8,
                    0.0f);
    for (int step = 0; step < wg::kTileK / 16; ++step) {
      for (int k = step * 16; k < step * 16 + 16; ++k) {
        for (int group = 0; group < 2; ++group) {
          wg::Descriptor d = wg::mnMajorDescriptor(group, step);
          for (int m = 0; m < 64; ++m)
            ASSERT_EQ(stage[static_cast<size_t>(
                          canonicalByte(true, d, m, k - step * 16) / 2)],
                      k < valid ? A(group * 64 + m, k) : 0.0f)
                << "A (m " << group * 64 + m << ", k " << k << "), valid "
                << valid;
        }
        wg::Descriptor d = wg::mnMajorDescriptor(0, step);
        d.start += wg::kATileElements; // B follows A in the stage
        for (int n = 0; n < wg::kTileN; ++n)
          ASSERT_EQ(stage[static_cast<size_t>(
                        canonicalByte(true, d, n, k - step * 16) / 2)],
                    k < valid ? B(n, k) : 0.0f)
              << "B (n " << n << ", k " << k << "), valid " << valid;
      }
    }
  }
}

TEST(MoeTile, HopperAccumulatorsCoverTheTileOnce) {
  std::vector<int> hits(wg::kTileM * wg::kTileN, 0);
  for (int thread = 0; thread < wg::kThreads; ++thread)
    for (int j = 0; j < wg::kTileN / 8; ++j)
      for (int half = 0; half < 2; ++half) {
        Cell cell = wg::accumulatorCell(thread, j, half);
        ASSERT_LT(cell.r, wg::kTileM);
        ASSERT_LT(cell.c + 1, wg::kTileN);
        ++hits[static_cast<size_t>(cell.r * wg::kTileN + cell.c)];
        ++hits[static_cast<size_t>(cell.r * wg::kTileN + cell.c + 1)];
      }
  for (int h : hits)
    ASSERT_EQ(h, 1);
}
