// cute_tmem_oracle.cpp -- host-only CuTe program that derives TMEM data-flow maps
// from NVIDIA's own CuTe C++ traits (CUTLASS headers) and prints them as JSON.
//
// It is the C++ half of the independent oracle for simtc; tests/oracle/regen_tmem.py
// compiles it (g++ -std=c++17, CUTLASS + CUDA include dirs, nothing is linked from CUDA),
// runs it and writes tests/data/cute_tmem.json.gz.  See tests/data/README_tmem.md.
//
// Nothing here restates a PTX formula.  Every number printed is obtained by evaluating
// CuTe objects:
//
//  (1) tcgen05.ld / tcgen05.st  (Copy_Traits<SM100_TMEM_LOAD_*> / <SM100_TMEM_STORE_*>)
//      For thread t (ThrID = identity on the 32 lanes of a warp) and register-side bit v,
//        bit id   = RegLayout(t, v)      (load: DstLayout, store: SrcLayout)
//        tmem bit = ValID(bit id)         (TMEM "bit address": lane * TMEM::DP_b + column*32 + bit)
//      The TMEM-side layout (load: SrcLayout, store: DstLayout) is checked to be the identity
//      on the bit id for every thread (stride 0 over threads: the access is warp-collective).
//      The bit address is then decoded twice and both decodings must agree:
//        (a) arithmetic: lane = a / DP_b, column = (a % DP_b) / 32, bit-in-cell = a % 32;
//        (b) CuTe's tmem_ptr: make_tmem_ptr<uint32_t>() + (a >> 5) -> (dp_, col_), and for
//            16-bit data make_tmem_ptr<uint16_t>() + (a >> 4) -> (dp_, col_, idx_ = sub-word).
//      Register i of the thread holds bits [32 i, 32 i + 32) (copy_unpack recasts the
//      fragment to the op's uint32_t register array).  A register is classified as
//        unpacked : all 32 bits -> one cell, bit k -> cell bit k
//        packed   : bits [16h,16h+16) -> one cell (h = 0, 1), bit 16h+k -> cell bit k
//      anything else aborts the program.
//      Cross-check through the user-facing API (ORACLE_PART 3, on a sample of ops: every
//      shape, both packings): make_tmem_copy(Copy_Atom<Op,T>, 128-lane x 512-column TMEM
//      tensor of T = float or half_t) is built; for each of the 128 threads partition_S gives
//      the warp's collective base address (lane 32*(thread/32)) and partition_D of an identity
//      tensor the (lane, column) of every register value; they must equal the traits-level
//      map above.
//
//  (2) tcgen05.cp (Copy_Traits<SM100_UTCCP_*_1cta>): for every copy value v,
//        source logical bit = SrcLayout(0, v), destination logical bit = DstLayout(0, v),
//        tmem bit = ValID(destination logical bit).
//      The source logical bit is decoded in ValID's own shape (the header documents the modes
//      as [core_matrix_strided, core_matrix_leading, repeat/broadcast...]):
//        source row = coord0 + size0 * (coords of modes >= 2 that the SrcLayout does not
//        broadcast), source bit = coord1.  32-bit source chunks are checked to land whole in
//        one TMEM cell.
//
//  (3) UMMA TMEM fragments: the fragment type the atom's MMA_Traits declare (FrgTypeC, FrgTypeA
//      = UMMA::tmem_frg_1sm / tmem_frg_2sm), made with make_tensor<FrgType>(((M_sm,N),blocks,1))
//      exactly as make_fragment_C does; the atom's CLayout / ALayout ((cta, value) -> m + M*n)
//      gives each value's tile coordinate.  For selected configurations this is compared with
//      the full user path partition_fragment_C(make_tiled_mma(op), tile) +
//      get_slice(cta).partition_C(identity tile) (and partition_shape_A / partition_A for A).
//      .ws: CUTLASS 4.2 has no .ws MMA atom, only UMMA::tmem_frg_ws_1sm, evaluated the same way.
//      TMEM address = raw_pointer_cast(fragment tmem_ptr + layout offset):
//      lane = bits 16..22, column = bits 0..15, 16-bit sub-word index = bit 31.
//
// Output: one JSON object on stdout (not key-sorted; regen_tmem.py normalises it).

#include <cute/tensor.hpp>
#include <cute/atom/copy_atom.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cutlass/version.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace cute;

#ifndef ORACLE_PART
#define ORACLE_PART 0
#endif
#define PART(n) (ORACLE_PART == 0 || ORACLE_PART == (n))

static void die(const char* what, const char* ctx) {
  std::fprintf(stderr, "cute_tmem_oracle: FAILED %s (%s)\n", what, ctx);
  std::exit(2);
}
#define REQUIRE(cond, ctx) do { if (!(cond)) die(#cond, ctx); } while (0)

template <class L>
static std::string str(L const& l) {
  std::ostringstream os;
  os << l;
  return os.str();
}

static constexpr int64_t kDPb = TMEM::DP_b::value;   // TMEM lane stride in bit addressing

struct Cell { int lane, col, bit; };

// Decode a TMEM bit address both arithmetically and through CuTe's tmem_ptr.
static Cell decode_bit_address(int64_t a, const char* ctx) {
  REQUIRE(a >= 0, ctx);
  Cell c;
  c.lane = int(a / kDPb);
  int64_t cb = a % kDPb;
  c.col = int(cb / 32);
  c.bit = int(cb % 32);
  // through tmem_ptr<uint32_t>: word address (lane in bits 16..23, column in bits 0..15)
  uint32_t w = raw_pointer_cast(make_tmem_ptr<uint32_t>(0) + uint32_t(a >> 5));
  REQUIRE(int((w >> 16) & 0xFF) == c.lane, ctx);
  REQUIRE(int(w & 0xFFFF) == c.col, ctx);
  REQUIRE((w >> 24) == 0, ctx);
  // through tmem_ptr<uint16_t>: "+ offset" rotates the sub-word index into bit 31
  uint32_t h = raw_pointer_cast(make_tmem_ptr<uint16_t>(0) + uint32_t(a >> 4));
  REQUIRE(int((h >> 16) & 0xFF) == c.lane, ctx);
  REQUIRE(int(h & 0xFFFF) == c.col, ctx);
  REQUIRE(int(h >> 31) == (c.bit / 16), ctx);
  return c;
}

static bool g_first_record = true;
static void sep() { std::printf(g_first_record ? "\n" : ",\n"); g_first_record = false; }

// ---------------------------------------------------------------------------------------------
// (1) tcgen05.ld / tcgen05.st
// ---------------------------------------------------------------------------------------------

// map[t][i] = pieces; piece = (lane, col, half) with half = -1 for a whole 32-bit register
using Piece = std::tuple<int, int, int>;
using RegMap = std::vector<std::vector<std::vector<Piece>>>;

template <class Op, bool IsLoad>
static RegMap derive_ldst(const char* name, std::string* layouts_json) {
  using Tr = Copy_Traits<Op>;
  using RegSide  = conditional_t<IsLoad, typename Tr::DstLayout, typename Tr::SrcLayout>;
  using TmemSide = conditional_t<IsLoad, typename Tr::SrcLayout, typename Tr::DstLayout>;
  using RegArr   = conditional_t<IsLoad, typename Op::DRegisters, typename Op::SRegisters>;
  using TmemArr  = conditional_t<IsLoad, typename Op::SRegisters, typename Op::DRegisters>;
  constexpr int nregs = std::extent<RegArr>::value;
  static_assert(std::extent<TmemArr>::value == 1, "TMEM side is one 32-bit address");
  using ValID = typename Tr::ValID;
  using ThrID = typename Tr::ThrID;

  RegSide rl{}; TmemSide tl{}; ValID vid{}; ThrID thr{};
  REQUIRE(int(size(thr)) == 32, name);
  for (int t = 0; t < 32; ++t) REQUIRE(int(thr(t)) == t, name);
  const int nthr = int(size<0>(rl));
  const int nbits = int(size<1>(rl));
  REQUIRE(nthr == 32, name);
  REQUIRE(nbits == 32 * nregs, name);
  REQUIRE(int(size<0>(tl)) == 32, name);
  REQUIRE(int(size<1>(tl)) == 32 * nbits, name);  // TMEM side: all bits of the warp
  REQUIRE(int(size(vid)) == 32 * nbits, name);

  // TMEM side must be thread-invariant identity: bit id -> same bit id.
  for (int t = 0; t < 32; ++t)
    for (int b = 0; b < 32 * nbits; b += (t == 0 ? 1 : 97))
      REQUIRE(int64_t(tl(t, b)) == b, name);

  std::vector<uint8_t> seen(size_t(128) * 512 * 32, 0);
  RegMap map(32, std::vector<std::vector<Piece>>(nregs));
  for (int t = 0; t < 32; ++t) {
    for (int i = 0; i < nregs; ++i) {
      Cell c[32];
      for (int k = 0; k < 32; ++k) {
        int64_t bid = int64_t(rl(t, 32 * i + k));
        REQUIRE(bid >= 0 && bid < 32 * nbits, name);
        int64_t a = int64_t(vid(bid));
        c[k] = decode_bit_address(a, name);
        REQUIRE(c[k].lane < 128 && c[k].col < 512, name);
        size_t key = (size_t(c[k].lane) * 512 + c[k].col) * 32 + c[k].bit;
        REQUIRE(seen[key] == 0, name);  // each TMEM bit touched by one thread-bit only
        seen[key] = 1;
      }
      bool whole = true;
      for (int k = 0; k < 32; ++k)
        whole = whole && c[k].lane == c[0].lane && c[k].col == c[0].col && c[k].bit == k;
      if (whole) {
        map[t][i].emplace_back(c[0].lane, c[0].col, -1);
        continue;
      }
      for (int hh = 0; hh < 2; ++hh) {
        Cell const& c0 = c[16 * hh];
        for (int k = 0; k < 16; ++k) {
          Cell const& ck = c[16 * hh + k];
          REQUIRE(ck.lane == c0.lane && ck.col == c0.col && ck.bit == k, name);  // low 16 bits
        }
        map[t][i].emplace_back(c0.lane, c0.col, hh);
      }
    }
  }
  std::ostringstream os;
  os << "\"thr_id\": \"" << str(thr) << "\", \"val_id\": \"" << str(vid)
     << "\", \"src_layout\": \"" << str(typename Tr::SrcLayout{})
     << "\", \"dst_layout\": \"" << str(typename Tr::DstLayout{}) << "\"";
  *layouts_json = os.str();
  return map;
}

static void print_regmap(RegMap const& map) {
  std::printf("[");
  for (size_t t = 0; t < map.size(); ++t) {
    std::printf(t ? ",[" : "[");
    for (size_t i = 0; i < map[t].size(); ++i) {
      std::printf(i ? ",[" : "[");
      for (size_t p = 0; p < map[t][i].size(); ++p) {
        auto [l, c, h] = map[t][i][p];
        if (h < 0) std::printf("%s[%d,%d,null]", p ? "," : "", l, c);
        else       std::printf("%s[%d,%d,%d]", p ? "," : "", l, c, h);
      }
      std::printf("]");
    }
    std::printf("]");
  }
  std::printf("]");
}

// Cross-check with the user-facing path: make_tmem_copy over a 128-lane TMEM tensor.
// Returns the number of (thread, register value) pairs compared.
template <class Op, bool Pack16>
static int xcheck_make_tmem_copy(const char* name, RegMap const& map) {
  using T = conditional_t<Pack16, half_t, float>;
  // A (128, 512) tensor of T, one value per 32-bit column (16-bit values in the low half):
  // column stride in T units = 32 / sizeof_bits<T>.
  constexpr int col_stride = 32 / int(sizeof_bits<T>::value);
  auto tmem = make_tensor(make_tmem_ptr<T>(0),
                          make_layout(make_shape(_128{}, Int<512>{}),
                                      make_stride(TMEM::DP<T>{}, Int<col_stride>{})));
  auto tiled = make_tmem_copy(Copy_Atom<Op, T>{}, tmem);
  auto cid = make_identity_tensor(shape(tmem));
  int compared = 0;
  for (int tid = 0; tid < 128; ++tid) {
    auto thr = tiled.get_slice(tid);
    auto tDcD = thr.partition_D(cid);   // (CPY, CPY_M, CPY_N) of (m, n) coordinates
    auto tDtS = thr.partition_S(tmem);  // TMEM side: collective base address of the warp
    uint32_t base = raw_pointer_cast(tDtS.data());
    REQUIRE(int(base >> 16 & 0xFF) == 32 * (tid / 32), name);
    REQUIRE(int(base & 0xFFFF) == 0, name);
    const int nv = int(size<0>(tDcD));
    const int t = tid % 32;
    int nregs = int(map[t].size());
    REQUIRE(nv == nregs * (Pack16 ? 2 : 1), name);
    for (int j = 0; j < nv; ++j) {
      auto mn = tDcD(make_coord(j, 0, 0));
      int m = int(get<0>(mn)), n = int(get<1>(mn));
      int reg = Pack16 ? j / 2 : j;
      auto const& pieces = map[t][reg];
      auto [l, c, h] = Pack16 ? pieces.at(size_t(j % 2)) : pieces.at(0);
      if (Pack16) REQUIRE(h == j % 2, name); else REQUIRE(h == -1, name);
      REQUIRE(m == 32 * (tid / 32) + l, name);
      REQUIRE(n == c, name);
      ++compared;
    }
  }
  return compared;
}

template <class LoadOp, class StoreOp, bool Pack16>
static void emit_ldst_pair(const char* lname, const char* sname) {
  std::string lay_l, lay_s;
  RegMap ml = derive_ldst<LoadOp, true>(lname, &lay_l);
  RegMap ms = derive_ldst<StoreOp, false>(sname, &lay_s);
  // Packing detected from the bits must agree with the _16b suffix.
  for (auto const* mp : {&ml, &ms})
    for (auto const& th : *mp) for (auto const& r : th)
      REQUIRE(int(r.size()) == (Pack16 ? 2 : 1), lname);
  sep();
  std::printf("{\"op\": \"%s\", \"dir\": \"load\", %s, \"map\": ", lname, lay_l.c_str());
  print_regmap(ml);
  std::printf("}");
  sep();
  std::printf("{\"op\": \"%s\", \"dir\": \"store\", %s, \"map\": ", sname, lay_s.c_str());
  print_regmap(ms);
  std::printf("}");
}

template <class LoadOp, bool Pack16>
static void emit_xcheck(const char* lname) {
  std::string lay;
  RegMap ml = derive_ldst<LoadOp, true>(lname, &lay);
  int n = xcheck_make_tmem_copy<LoadOp, Pack16>(lname, ml);
  sep();
  std::printf("{\"op\": \"%s\", \"values_compared\": %d}", lname, n);
}

#define LDST(S, N) \
  emit_ldst_pair<SM100_TMEM_LOAD_##S##N##x, SM100_TMEM_STORE_##S##N##x, false>( \
      "SM100_TMEM_LOAD_" #S #N "x", "SM100_TMEM_STORE_" #S #N "x"); \
  emit_ldst_pair<SM100_TMEM_LOAD_##S##N##x_16b, SM100_TMEM_STORE_##S##N##x_16b, true>( \
      "SM100_TMEM_LOAD_" #S #N "x_16b", "SM100_TMEM_STORE_" #S #N "x_16b");

#define XCHECK(S, N) emit_xcheck<SM100_TMEM_LOAD_##S##N##x, false>("SM100_TMEM_LOAD_" #S #N "x");
#define XCHECK16(S, N) emit_xcheck<SM100_TMEM_LOAD_##S##N##x_16b, true>("SM100_TMEM_LOAD_" #S #N "x_16b");

#if PART(1)
static void emit_all_ldst() {
  std::printf("\"ldst\": [");
  g_first_record = true;
  LDST(32dp32b, 1) LDST(32dp32b, 2) LDST(32dp32b, 4) LDST(32dp32b, 8)
  LDST(32dp32b, 16) LDST(32dp32b, 32) LDST(32dp32b, 64) LDST(32dp32b, 128)
  LDST(16dp64b, 1) LDST(16dp64b, 2) LDST(16dp64b, 4) LDST(16dp64b, 8)
  LDST(16dp64b, 16) LDST(16dp64b, 32) LDST(16dp64b, 64) LDST(16dp64b, 128)
  LDST(16dp128b, 1) LDST(16dp128b, 2) LDST(16dp128b, 4) LDST(16dp128b, 8)
  LDST(16dp128b, 16) LDST(16dp128b, 32) LDST(16dp128b, 64)
  LDST(16dp256b, 1) LDST(16dp256b, 2) LDST(16dp256b, 4) LDST(16dp256b, 8)
  LDST(16dp256b, 16) LDST(16dp256b, 32)
  LDST(16dp32b, 1) LDST(16dp32b, 2) LDST(16dp32b, 4) LDST(16dp32b, 8)
  LDST(16dp32b, 16) LDST(16dp32b, 32) LDST(16dp32b, 64) LDST(16dp32b, 128)
  std::printf("\n]");
}

#endif  // PART(1)

#if PART(3)
// make_tmem_copy is expensive to compile (~2 s per op), so it is run on a representative
// subset: every shape once, both packings, .x1 and .x2.
static void emit_all_xcheck() {
  std::printf("\"make_tmem_copy_xcheck\": [");
  g_first_record = true;
  XCHECK(32dp32b, 2) XCHECK16(16dp64b, 1) XCHECK(16dp128b, 2) XCHECK16(16dp256b, 1)
  XCHECK16(16dp32b, 2)
  std::printf("\n]");
}

#endif  // PART(3)

#if PART(1)
// ---------------------------------------------------------------------------------------------
// (2) tcgen05.cp  (UTCCP)
// ---------------------------------------------------------------------------------------------

template <class Shp>
static std::vector<int> flat_sizes(Shp const& s) {
  std::vector<int> v;
  for_each(flatten(s), [&](auto e) { v.push_back(int(e)); });
  return v;
}

template <class Op>
static void emit_utccp(const char* name) {
  using Tr = Copy_Traits<Op>;
  typename Tr::ValID vid{};
  typename Tr::SrcLayout sl{};
  typename Tr::DstLayout dl{};
  typename Tr::ThrID thr{};
  REQUIRE(int(size(thr)) == 1, name);
  const int nv = int(size<1>(dl));
  REQUIRE(int(size<1>(sl)) == nv, name);
  std::vector<int> vshape = flat_sizes(shape(vid));
  REQUIRE(vshape.size() >= 2, name);

  std::set<std::tuple<int, int, int, int>> entries;      // (src_row, src_chunk, lane, col)
  std::vector<uint8_t> seen(size_t(128) * 512 * 32, 0);
  int written_bits = 0;
  for (int v = 0; v < nv; ++v) {
    int64_t s = int64_t(sl(0, v));
    int64_t d = int64_t(dl(0, v));
    Cell c = decode_bit_address(int64_t(vid(d)), name);
    size_t key = (size_t(c.lane) * 512 + c.col) * 32 + c.bit;
    REQUIRE(seen[key] == 0, name);
    seen[key] = 1;
    ++written_bits;
    // decode the source logical bit in ValID's (flattened, column-major) shape
    std::vector<int> crd(vshape.size());
    int64_t r = s;
    for (size_t k = 0; k < vshape.size(); ++k) { crd[k] = int(r % vshape[k]); r /= vshape[k]; }
    REQUIRE(r == 0, name);
    int row = crd[0], mult = vshape[0];
    for (size_t k = 2; k < vshape.size(); ++k) { row += mult * crd[k]; mult *= vshape[k]; }
    int bit = crd[1];
    REQUIRE(bit % 32 == c.bit, name);   // 32-bit source chunks land whole and aligned in a cell
    entries.emplace(row, bit / 32, c.lane, c.col);
  }
  // every (row, chunk, lane, col) must be backed by all 32 of its bits
  REQUIRE(int(entries.size()) * 32 == written_bits, name);
  sep();
  std::printf("{\"op\": \"%s\", \"thr_id\": \"%s\", \"val_id\": \"%s\", \"src_layout\": \"%s\", "
              "\"dst_layout\": \"%s\", \"entries\": [",
              name, str(thr).c_str(), str(vid).c_str(), str(sl).c_str(), str(dl).c_str());
  bool first = true;
  for (auto const& [row, ch, lane, col] : entries) {
    std::printf("%s[%d,%d,%d,%d]", first ? "" : ",", row, ch, lane, col);
    first = false;
  }
  std::printf("]}");
}

static void emit_all_utccp() {
  std::printf("\"utccp\": [");
  g_first_record = true;
  emit_utccp<SM100_UTCCP_128dp256bit_1cta>("SM100_UTCCP_128dp256bit_1cta");
  emit_utccp<SM100_UTCCP_128dp128bit_1cta>("SM100_UTCCP_128dp128bit_1cta");
  emit_utccp<SM100_UTCCP_4dp256bit_1cta>("SM100_UTCCP_4dp256bit_1cta");
  emit_utccp<SM100_UTCCP_4x32dp128bit_1cta>("SM100_UTCCP_4x32dp128bit_1cta");
  emit_utccp<SM100_UTCCP_2x64dp128bitlw0213_1cta>("SM100_UTCCP_2x64dp128bitlw0213_1cta");
  emit_utccp<SM100_UTCCP_2x64dp128bitlw0123_1cta>("SM100_UTCCP_2x64dp128bitlw0123_1cta");
  std::printf("\n]");
}

#endif  // PART(1)

#if PART(2)
// ---------------------------------------------------------------------------------------------
// (3) UMMA accumulator (and TS A-operand) TMEM fragments
// ---------------------------------------------------------------------------------------------

struct FrgRec { int r, c, cta, lane, col, half; };

// Collect one fragment: for every element i, its tile coordinate crd_fn(i) and its TMEM address
// (fragment tmem_ptr + layout offset, as CuTe's MMA would pass it to the instruction).
template <class Frag, class CrdFn>
static void collect_frag(const char* ctx, Frag const& frg, int nelem, CrdFn crd_fn, int cta,
                         bool sub16, std::vector<FrgRec>* out) {
  REQUIRE(int(size(frg)) == nelem, ctx);
  for (int i = 0; i < nelem; ++i) {
    auto [r, c] = crd_fn(i);
    uint32_t a = raw_pointer_cast(frg.data() + frg.layout()(i));
    int lane = int(a >> 16 & 0xFF), col = int(a & 0xFFFF), idx = int(a >> 24);
    REQUIRE(lane < 128 && col < 512, ctx);
    if (!sub16) REQUIRE(idx == 0, ctx);
    else REQUIRE(idx == 0 || idx == 0x80, ctx);
    out->push_back({r, c, cta, lane, col, sub16 ? (idx >> 7) : -1});
  }
}

// Print rows x cols map; entries [lane, col] (+ half for 16-bit sub-word data) (+ cta first
// for cta_group::2).
static void print_frag(const char* kind, const char* source, const char* frag_type,
                       std::string const& layout_str, int rows, int cols,
                       std::vector<FrgRec> const& recs, bool sub16, bool with_cta,
                       const char* extra) {
  std::vector<FrgRec> m(size_t(rows) * cols, FrgRec{-1, -1, -1, -1, -1, -1});
  std::set<std::tuple<int, int, int, int>> locs;
  for (auto const& x : recs) {
    REQUIRE(x.r >= 0 && x.r < rows && x.c >= 0 && x.c < cols, kind);
    REQUIRE(m[size_t(x.r) * cols + x.c].r == -1, kind);  // each element once
    REQUIRE(locs.emplace(x.cta, x.lane, x.col, x.half).second, kind);  // distinct locations
    m[size_t(x.r) * cols + x.c] = x;
  }
  sep();
  std::printf("{\"kind\": \"%s\", \"source\": \"%s\", \"frag_type\": \"%s\", \"rows\": %d, "
              "\"cols\": %d, \"layout_str\": \"%s\"%s, \"map\": [",
              kind, source, frag_type, rows, cols, layout_str.c_str(), extra);
  for (int r = 0; r < rows; ++r) {
    std::printf(r ? ",[" : "[");
    for (int c = 0; c < cols; ++c) {
      FrgRec const& x = m[size_t(r) * cols + c];
      REQUIRE(x.r >= 0, kind);  // every element covered
      const char* comma = c ? "," : "";
      if (with_cta)   std::printf("%s[%d,%d,%d]", comma, x.cta, x.lane, x.col);
      else if (sub16) std::printf("%s[%d,%d,%d]", comma, x.lane, x.col, x.half);
      else            std::printf("%s[%d,%d]", comma, x.lane, x.col);
    }
    std::printf("]");
  }
  std::printf("]}");
}

// The fragment may refine a mode (e.g. (64,N) -> ((16,4),N)); linear (colexicographic)
// indices agree as long as every top-level mode has the same size.
template <class A, class B>
static bool same_mode_sizes(A const& a, B const& b) {
  if (int(rank(a)) != int(rank(b))) return false;
  bool ok = true;
  for_each(make_seq<decltype(rank(a))::value>{}, [&](auto k) { ok = ok && int(size<k>(a)) == int(size<k>(b)); });
  return ok;
}

template <class T>
static auto crd_of(T const& t) {
  return [&t](int i) { auto x = t(i); return std::pair<int, int>(int(get<0>(x)), int(get<1>(x))); };
}

using bf16 = bfloat16_t;
using KM = UMMA::Major;

// Direct path (cheap to compile): the fragment type that the atom's MMA_Traits declare
// (FrgTypeC / FrgTypeA), built with make_tensor<FrgType>(((M_SM, N), blocks_m, blocks_n)) exactly
// as make_fragment_C does, and the atom's own CLayout / ALayout ((cta, value) -> m + M*n) giving
// the tile coordinate of every value.  Block b of the rest mode holds tile rows [b*M, (b+1)*M)
// (checked against the full TiledMMA path below for the multi-block cases).
template <class FrgType, class TVLayout, int MFull, int MSm, int N, int NSm, int BlocksM, int BlocksN>
static std::string collect_direct(const char* ctx, bool sub16, std::vector<FrgRec>* out) {
  auto frg = make_tensor<FrgType>(make_shape(make_shape(Int<MSm>{}, Int<N>{}), Int<BlocksM>{}, Int<BlocksN>{}));
  TVLayout tv{};
  REQUIRE(int(size<0>(tv)) == NSm && int(size<1>(tv)) == MSm * N, ctx);
  for (int cta = 0; cta < NSm; ++cta)
    for (int j = 0; j < MSm * N; ++j)
      for (int bm = 0; bm < BlocksM; ++bm)
        for (int bn = 0; bn < BlocksN; ++bn) {
          int idx = int(tv(cta, j));
          int m = idx % MFull + bm * MFull, n = idx / MFull + bn * N;
          uint32_t a = raw_pointer_cast(frg.data() + frg.layout()(j, bm, bn));
          int lane = int(a >> 16 & 0xFF), col = int(a & 0xFFFF), sub = int(a >> 24);
          REQUIRE(lane < 128 && col < 512, ctx);
          REQUIRE(sub16 ? (sub == 0 || sub == 0x80) : sub == 0, ctx);
          out->push_back({m, n, cta, lane, col, sub16 ? (sub >> 7) : -1});
        }
  return str(frg.layout());
}

static bool same_recs(std::vector<FrgRec> a, std::vector<FrgRec> b) {
  auto key = [](FrgRec const& x) { return std::make_tuple(x.r, x.c, x.cta, x.lane, x.col, x.half); };
  auto lt = [&](FrgRec const& x, FrgRec const& y) { return key(x) < key(y); };
  std::sort(a.begin(), a.end(), lt);
  std::sort(b.begin(), b.end(), lt);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) if (key(a[i]) != key(b[i])) return false;
  return true;
}

// Full path (expensive to compile, used as a cross-check on selected configurations):
// partition_fragment_C(make_tiled_mma(Op), tile) for the TMEM addresses and
// get_slice(cta).partition_C(identity tile) for the coordinates.
template <class Op, int TileM, int N, int NSm>
static std::vector<FrgRec> collect_full_C() {
  auto mma = make_tiled_mma(Op{});
  auto tile = make_shape(Int<TileM>{}, Int<N>{});
  auto acc = partition_fragment_C(mma, tile);
  std::vector<FrgRec> recs;
  for (int cta = 0; cta < NSm; ++cta) {
    auto crd = mma.get_slice(cta).partition_C(make_identity_tensor(tile));
    REQUIRE(same_mode_sizes(acc, crd), "full C shape");
    collect_frag("full C", acc, int(size(crd)), crd_of(crd), cta, false, &recs);
  }
  return recs;
}

template <class Op, int TileM, int TileK>
static std::vector<FrgRec> collect_full_A() {
  auto mma = make_tiled_mma(Op{});
  using FrgA = typename decltype(mma)::FrgTypeA;
  auto tileA = make_shape(Int<TileM>{}, Int<TileK>{});
  auto a = make_tensor<FrgA>(partition_shape_A(mma, tileA));
  auto crdA = mma.get_slice(0).partition_A(make_identity_tensor(tileA));
  REQUIRE(same_mode_sizes(a, crdA), "full A shape");
  std::vector<FrgRec> recs;
  collect_frag("full A", a, int(size(crdA)), crd_of(crdA), 0, true, &recs);
  return recs;
}

template <class Op> using TraitsOf = MMA_Traits<Op>;
template <int M, int N> using SS1 = SM100_MMA_F16BF16_SS<bf16, bf16, float, M, N, KM::K, KM::K>;
template <int M, int N> using TS1 = SM100_MMA_F16BF16_TS<bf16, bf16, float, M, N, KM::K, KM::K>;
template <int M, int N> using SS2 = SM100_MMA_F16BF16_2x1SM_SS<bf16, bf16, float, M, N, KM::K, KM::K>;

enum class Full { No, C, CA };

// Accumulator of a cta_group::1 / ::2 atom; tile = BlocksM atoms stacked in M.
template <class Op, int M, int N, int NSm, int BlocksM, Full X>
static void emit_acc(const char* op_name, const char* alloc_mode) {
  using Tr = TraitsOf<Op>;
  constexpr int MSm = M / NSm;
  std::vector<FrgRec> recs;
  std::string lay = collect_direct<typename Tr::FrgTypeC, typename Tr::CLayout, M, MSm, N, NSm, BlocksM, 1>(op_name, false, &recs);
  bool full = false;
  if constexpr (X != Full::No) {
    REQUIRE(same_recs(recs, collect_full_C<Op, M * BlocksM, N, NSm>()), op_name);
    full = true;
  }
  char extra[320];
  std::snprintf(extra, sizeof extra, ", \"op\": \"%s\", \"m\": %d, \"n\": %d, \"tile_m\": %d, "
                "\"ws\": false, \"cta_group\": %d, \"alloc_mode\": \"%s\", \"partition_fragment_checked\": %s",
                op_name, M, N, M * BlocksM, NSm, alloc_mode, full ? "true" : "false");
  print_frag("acc", "make_tensor<MMA_Traits<op>::FrgTypeC>(((M/cta_group,N),tile_m/M,1)) + MMA_Traits<op>::CLayout",
             NSm == 2 ? "UMMA::tmem_frg_2sm<float>"
                      : (std::string(alloc_mode) == "Interleaved" ? "UMMA::tmem_frg_1sm<float>"
                                                                  : "UMMA::tmem_frg_1sm<float,int32_t,NonInterleaved>"),
             lay, M * BlocksM, N, recs, false, NSm == 2, extra);
}

// A operand of the TS atom (bf16 in TMEM), BlocksK K-blocks of 16.
template <int M, int N, int BlocksK, Full X>
static void emit_a_operand(const char* op_name) {
  using Op = TS1<M, N>;
  using Tr = TraitsOf<Op>;
  constexpr int K = 16;
  std::vector<FrgRec> recs;
  // fragment ((M,K),1,BlocksK); value j -> ALayout (1,(M,K)):(0,(1,M)) -> m + M*k
  auto frg = make_tensor<typename Tr::FrgTypeA>(make_shape(make_shape(Int<M>{}, Int<K>{}), _1{}, Int<BlocksK>{}));
  typename Tr::ALayout tv{};
  for (int j = 0; j < M * K; ++j)
    for (int bk = 0; bk < BlocksK; ++bk) {
      int idx = int(tv(0, j));
      int m = idx % M, k = idx / M + bk * K;
      uint32_t a = raw_pointer_cast(frg.data() + frg.layout()(j, 0, bk));
      int sub = int(a >> 24);
      REQUIRE(sub == 0 || sub == 0x80, op_name);
      recs.push_back({m, k, 0, int(a >> 16 & 0xFF), int(a & 0xFFFF), sub >> 7});
    }
  bool full = false;
  if constexpr (X == Full::CA) {
    REQUIRE(same_recs(recs, collect_full_A<Op, M, K * BlocksK>()), op_name);
    full = true;
  }
  char extra[320];
  std::snprintf(extra, sizeof extra, ", \"op\": \"%s\", \"m\": %d, \"n\": %d, \"tile_m\": %d, \"tile_k\": %d, "
                "\"ws\": false, \"cta_group\": 1, \"alloc_mode\": \"NonInterleaved\", \"partition_fragment_checked\": %s",
                op_name, M, N, M, K * BlocksK, full ? "true" : "false");
  print_frag("a_operand", "make_tensor<MMA_Traits<op>::FrgTypeA>(((M,16),1,tile_k/16)) + MMA_Traits<op>::ALayout",
             "UMMA::tmem_frg_1sm<bf16,bf16,NonInterleaved>", str(frg.layout()), M, K * BlocksK, recs, true,
             false, extra);
}

// cta_group::1 .ws: CUTLASS 4.2 defines no .ws MMA atom, only the fragment type
// UMMA::tmem_frg_ws_1sm; it is called the way make_fragment_C would, with ((M,N),1,1), and the
// value mode (M,N) is read with the CLayout convention of every UMMA atom: value j = m + M*n.
template <int M, int N>
static void emit_ws() {
  using CL = Layout<Shape<_1, Shape<Int<M>, Int<N>>>, Stride<_0, Stride<_1, Int<M>>>>;
  std::vector<FrgRec> recs;
  std::string lay = collect_direct<UMMA::tmem_frg_ws_1sm<float>, CL, M, M, N, 1, 1, 1>("ws", false, &recs);
  char extra[320];
  std::snprintf(extra, sizeof extra, ", \"op\": null, \"m\": %d, \"n\": %d, \"tile_m\": %d, \"ws\": true, "
                "\"cta_group\": 1, \"alloc_mode\": null, \"partition_fragment_checked\": false", M, N, M);
  print_frag("acc", "UMMA::tmem_frg_ws_1sm<float>::make(((M,N),1,1)); value j = m + M*n",
             "UMMA::tmem_frg_ws_1sm<float>", lay, M, N, recs, false, false, extra);
}

#define ACC(OPT, M, N, NSM, BM, X, MODE) \
  emit_acc<OPT<M, N>, M, N, NSM, BM, X>(#OPT "<" #M "," #N ">", MODE);

static void emit_all_mma() {
  std::printf("\"mma_frg\": [");
  g_first_record = true;
  // Layout D: cta_group::1, M=128
  ACC(SS1, 128, 8, 1, 1, Full::No, "Interleaved")
  ACC(SS1, 128, 16, 1, 1, Full::No, "Interleaved")  ACC(SS1, 128, 64, 1, 1, Full::C, "Interleaved")
  ACC(SS1, 128, 128, 1, 1, Full::No, "Interleaved") ACC(SS1, 128, 256, 1, 1, Full::No, "Interleaved")
  // Layout F: cta_group::1, M=64, one atom
  ACC(SS1, 64, 8, 1, 1, Full::No, "Interleaved")    ACC(SS1, 64, 16, 1, 1, Full::No, "Interleaved")
  ACC(SS1, 64, 64, 1, 1, Full::No, "Interleaved")   ACC(SS1, 64, 128, 1, 1, Full::No, "Interleaved")
  ACC(SS1, 64, 256, 1, 1, Full::No, "Interleaved")
  // Layout F: four M=64 atoms in one 256-row tile, Interleaved (SS) vs NonInterleaved (TS)
  ACC(SS1, 64, 64, 1, 4, Full::C, "Interleaved")
  ACC(TS1, 64, 64, 1, 4, Full::C, "NonInterleaved")
  ACC(TS1, 128, 64, 1, 1, Full::No, "NonInterleaved")
  // A operand in TMEM (TS), two K-blocks
  emit_a_operand<128, 64, 2, Full::No>("TS1<128,64>");
  emit_a_operand<64, 64, 2, Full::CA>("TS1<64,64>");
  // .ws: Layout G (M=32), E (M=64), D (M=128)
  emit_ws<32, 64>();  emit_ws<32, 128>();  emit_ws<32, 256>();
  emit_ws<64, 64>();  emit_ws<64, 128>();  emit_ws<64, 256>();
  emit_ws<128, 64>(); emit_ws<128, 128>(); emit_ws<128, 256>();
  // cta_group::2 (per-CTA view): Layout A (M=256) and B (M=128)
  ACC(SS2, 256, 64, 2, 1, Full::No, "Interleaved")
  ACC(SS2, 128, 64, 2, 1, Full::C, "Interleaved")
  ACC(SS2, 128, 128, 2, 1, Full::No, "Interleaved")
  std::printf("\n]");
}

#endif  // PART(2)

// ORACLE_PART selects what this translation unit computes, so that regen_tmem.py can build
// the parts in parallel: 1 = ld/st + cp, 2 = MMA fragments, 3 = make_tmem_copy cross-check,
// 0 = everything.  Each run prints one JSON object; regen_tmem.py merges them.
int main() {
  std::printf("{\"cutlass_version\": \"%d.%d.%d\", ", CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH);
  std::printf("\"tmem_dp_b\": %lld", (long long)kDPb);
#if PART(1)
  std::printf(", ");
  emit_all_ldst();
  std::printf(", ");
  emit_all_utccp();
#endif
#if PART(2)
  std::printf(", ");
  emit_all_mma();
#endif
#if PART(3)
  std::printf(", ");
  emit_all_xcheck();
#endif
  std::printf("}\n");
  return 0;
}
