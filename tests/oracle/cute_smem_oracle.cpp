// cute_smem_oracle.cpp -- independent oracle for simtc's shared-memory model.
//
// Asks NVIDIA's own CuTe C++ code (the headers shipped in the nvidia-cutlass
// wheel) where every element of a canonical UMMA/GMMA shared-memory tile lives
// and which 64-bit matrix descriptor CuTe builds for it.  Nothing here is
// simtc code and nothing here re-derives a formula: every number printed is
// whatever CuTe computes.
//
// It is a host-only program (g++ -std=c++17, no GPU, no nvcc).  The case list
// is NOT in this file: tests/oracle/regen_smem.py writes it into a temporary
// header (default name `smem_cases.inc`, one SIMTC_CASE(...) line per case)
// and compiles this file with -I pointing at that directory; it may split the
// list over several executables built in parallel (-DSIMTC_CASES=...).
// See regen_smem.py and tests/data/README.md.
//
// How the numbers are obtained
//  * Tile layout: tile_to_shape(UMMA::Layout_<MAJOR>_<SWIZZLE>_Atom<T>{},
//    make_shape(Int<MN>{}, Int<K>{})) with the default order (MN first, then
//    K).  Its printed form goes to the LAYOUT line.
//  * Byte offsets: the swizzle of those composed layouts acts on the smem
//    POINTER, so we build make_tensor(make_smem_ptr((T*)base), layout) over a
//    1024-byte-aligned host buffer and report (char*)&tensor(mn,k) - base.
//    That is the byte offset the hardware swizzle produces for a tile that
//    starts on a 1024-byte boundary.
//  * Descriptors for k_slice == 0: make_umma_desc<Major>(slice) and
//    make_gmma_desc<Major>(slice) on one MMA-K slice of the tile, i.e.
//    tensor.compose(make_tile(Int<MN>{}, Int<KS>{})) (its first KS columns)
//    with KS = 32 bytes / sizeof(T).
//    Host pointers cannot be converted to smem addresses, so CuTe prints
//    "ERROR: cast_smem_ptr_to_uint not supported but used." on stdout and
//    uses start address 0; regen_smem.py drops those lines.
//  * Descriptors for k_slice == s > 0: the way CUTLASS mainloops step K.  The
//    tile is divided into MMA-K slices, tiled_divide(tensor, (MN, KS)) with
//    shape ((MN,KS), 1, K/KS); make_tensor<UMMA::smem_desc<Major>>(...) (and
//    the GMMA counterpart) turns it into a tensor of descriptors whose
//    DescriptorIterator adds the slice's unswizzled offset (in 16-byte units)
//    to the low word of the slice-0 descriptor; we print element (0, 0, s).
//    The iterator's slice 0 must agree with the direct call; the program
//    aborts if it does not.
//
// Output: line-oriented text on stdout, parsed by regen_smem.py:
//   CASE <id>
//   ATOM <MN extent> <K extent of the Layout_*_Atom<T>, in elements>
//   LAYOUT <CuTe's print() of the composed tile layout>
//   OFFSETS <rows*cols byte offsets, row-major: (mn,k) at mn*cols+k>
//   UMMA <0x%016llx | ->          ('-' = not requested for this case)
//   GMMA <0x%016llx | ->
//   END <id>
//
// Rejection probes: compiled with -fsyntax-only -DSIMTC_PROBE, every
// SIMTC_PROBE_UMMA / SIMTC_PROBE_GMMA line of the case file instantiates a
// descriptor construction that is expected to hit a static_assert inside
// CuTe; regen_smem.py records the assertion message from the compiler
// diagnostics (and fails if the probe unexpectedly compiles).

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/atom/mma_traits_sm100.hpp>

using namespace cute;

// The case list (written by regen_smem.py); override with -DSIMTC_CASES='"file"'.
#ifndef SIMTC_CASES
#define SIMTC_CASES "smem_cases.inc"
#endif

namespace simtc_oracle {

enum class Mj { K, MN };
enum class Sw { INTERLEAVE, SW32, SW64, SW128, SW128_32B };

template <class T, Mj M, Sw S> struct AtomOf;
// K-major atoms
template <class T> struct AtomOf<T, Mj::K,  Sw::INTERLEAVE> { using type = UMMA::Layout_K_INTER_Atom<T>;  };
template <class T> struct AtomOf<T, Mj::K,  Sw::SW32>       { using type = UMMA::Layout_K_SW32_Atom<T>;   };
template <class T> struct AtomOf<T, Mj::K,  Sw::SW64>       { using type = UMMA::Layout_K_SW64_Atom<T>;   };
template <class T> struct AtomOf<T, Mj::K,  Sw::SW128>      { using type = UMMA::Layout_K_SW128_Atom<T>;  };
// MN-major atoms
template <class T> struct AtomOf<T, Mj::MN, Sw::INTERLEAVE> { using type = UMMA::Layout_MN_INTER_Atom<T>; };
template <class T> struct AtomOf<T, Mj::MN, Sw::SW32>       { using type = UMMA::Layout_MN_SW32_Atom<T>;  };
template <class T> struct AtomOf<T, Mj::MN, Sw::SW64>       { using type = UMMA::Layout_MN_SW64_Atom<T>;  };
template <class T> struct AtomOf<T, Mj::MN, Sw::SW128>      { using type = UMMA::Layout_MN_SW128_Atom<T>; };
template <class T> struct AtomOf<T, Mj::MN, Sw::SW128_32B>  { using type = UMMA::Layout_MN_SW128_32B_Atom<T>; };

template <Mj M> constexpr UMMA::Major umma_major = (M == Mj::K) ? UMMA::Major::K : UMMA::Major::MN;
template <Mj M> constexpr SM90::GMMA::Major gmma_major =
    (M == Mj::K) ? SM90::GMMA::Major::K : SM90::GMMA::Major::MN;

// One 1024-byte-aligned host buffer stands in for shared memory.  Large
// enough for the biggest tile the case list uses (checked at run time).
constexpr size_t kBufBytes = size_t(1) << 18;
alignas(1024) static unsigned char g_smem[kBufBytes];

template <class T, Mj M, Sw S, int MN, int K>
auto make_tile_layout() {
  return tile_to_shape(typename AtomOf<T, M, S>::type{}, make_shape(Int<MN>{}, Int<K>{}));
}

template <class T, Mj M, Sw S, int MN, int K>
auto make_tile_tensor() {
  return make_tensor(make_smem_ptr(reinterpret_cast<T*>(g_smem)), make_tile_layout<T, M, S, MN, K>());
}

// Descriptor of MMA-K slice `SLICE` of the tile (see header comment).
// Slice 0 directly: the tile tensor composed with an (MN, KS) tile, i.e. its
// first KS columns.  Slice s > 0 through CuTe's DescriptorIterator, after
// checking that the iterator's slice 0 equals the direct descriptor.
template <class T, Mj M, Sw S, int MN, int K, int KS, int SLICE>
unsigned long long umma_desc() {
  auto t = make_tile_tensor<T, M, S, MN, K>();
  auto s0 = t.compose(make_tile(Int<MN>{}, Int<KS>{}));            // (MN, KS)
  UMMA::SmemDescriptor direct = UMMA::make_umma_desc<umma_major<M>>(s0);
  if constexpr (SLICE == 0) {
    return direct.desc_;
  } else {
    auto slices = tiled_divide(t, make_tile(Int<MN>{}, Int<KS>{}));   // ((MN,KS),1,K/KS)
    auto dtensor = make_tensor<UMMA::smem_desc<umma_major<M>>>(slices);
    UMMA::SmemDescriptor first = dtensor(0, 0, 0);
    UMMA::SmemDescriptor stepped = dtensor(0, 0, SLICE);
    if (first.desc_ != direct.desc_) {
      std::fprintf(stderr, "umma: direct %016llx != iterator %016llx\n",
                   (unsigned long long)direct.desc_, (unsigned long long)first.desc_);
      std::abort();
    }
    return stepped.desc_;
  }
}

template <class T, Mj M, Sw S, int MN, int K, int KS, int SLICE>
unsigned long long gmma_desc() {
  auto t = make_tile_tensor<T, M, S, MN, K>();
  auto s0 = t.compose(make_tile(Int<MN>{}, Int<KS>{}));            // (MN, KS)
  cute::GmmaDescriptor direct = SM90::GMMA::make_gmma_desc<gmma_major<M>>(s0);
  if constexpr (SLICE == 0) {
    return direct.desc_;
  } else {
    auto slices = tiled_divide(t, make_tile(Int<MN>{}, Int<KS>{}));   // ((MN,KS),1,K/KS)
    auto dtensor = make_tensor<SM90::GMMA::smem_desc<gmma_major<M>>>(slices);
    cute::GmmaDescriptor first = dtensor(0, 0, 0);
    cute::GmmaDescriptor stepped = dtensor(0, 0, SLICE);
    if (first.desc_ != direct.desc_) {
      std::fprintf(stderr, "gmma: direct %016llx != iterator %016llx\n",
                   (unsigned long long)direct.desc_, (unsigned long long)first.desc_);
      std::abort();
    }
    return stepped.desc_;
  }
}

#ifndef SIMTC_PROBE

template <int ID, class T, Mj M, Sw S, int MN, int K, int KS, int SLICE, bool DO_UMMA, bool DO_GMMA>
void run_case() {
  static_assert(MN * K * sizeof(T) <= kBufBytes, "tile larger than the fake smem buffer");
  static_assert(!(DO_UMMA || DO_GMMA) || (K % KS == 0 && SLICE * KS < K), "bad K slice");
  // Descriptors first: CuTe's host-side "ERROR: cast_smem_ptr_to_uint ..."
  // message must not land in the middle of one of our lines.
  unsigned long long ud = 0, gd = 0;
  if constexpr (DO_UMMA) ud = umma_desc<T, M, S, MN, K, KS, SLICE>();
  if constexpr (DO_GMMA) gd = gmma_desc<T, M, S, MN, K, KS, SLICE>();

  using Atom = typename AtomOf<T, M, S>::type;
  std::printf("CASE %d\nATOM %d %d\nLAYOUT ", ID, int(size<0>(Atom{})), int(size<1>(Atom{})));
  print(make_tile_layout<T, M, S, MN, K>());
  std::printf("\nOFFSETS");
  auto t = make_tile_tensor<T, M, S, MN, K>();
  char const* base = reinterpret_cast<char const*>(g_smem);
  for (int mn = 0; mn < MN; ++mn) {
    for (int k = 0; k < K; ++k) {
      long off = long(reinterpret_cast<char const*>(&t(mn, k)) - base);
      if (off < 0 || off >= long(kBufBytes)) {
        std::fprintf(stderr, "case %d: offset %ld out of range\n", ID, off);
        std::abort();
      }
      std::printf(" %ld", off);
    }
  }
  std::printf("\n");
  if constexpr (DO_UMMA) std::printf("UMMA 0x%016llx\n", ud); else std::printf("UMMA -\n");
  if constexpr (DO_GMMA) std::printf("GMMA 0x%016llx\n", gd); else std::printf("GMMA -\n");
  std::printf("END %d\n", ID);
}

}  // namespace simtc_oracle

#define SIMTC_CASE(ID, T, M, S, MN, K, KS, SLICE, DO_UMMA, DO_GMMA)                       \
  simtc_oracle::run_case<ID, T, simtc_oracle::Mj::M, simtc_oracle::Sw::S, MN, K, KS, SLICE, \
                         DO_UMMA, DO_GMMA>();
#define SIMTC_PROBE_UMMA(ID, T, M, S, MN, K, KS, SLICE)
#define SIMTC_PROBE_GMMA(ID, T, M, S, MN, K, KS, SLICE)

int main() {
#include SIMTC_CASES
  std::fflush(stdout);
  return 0;
}

#else  // SIMTC_PROBE: syntax-only compile that instantiates expected rejections

}  // namespace simtc_oracle

// Each probe is its own function template so that the compiler's
// "In instantiation of ... [with int ID = N]" context names the probe.
template <int ID, class T, simtc_oracle::Mj M, simtc_oracle::Sw S, int MN, int K, int KS, int SLICE>
unsigned long long probe_umma() { return simtc_oracle::umma_desc<T, M, S, MN, K, KS, SLICE>(); }
template <int ID, class T, simtc_oracle::Mj M, simtc_oracle::Sw S, int MN, int K, int KS, int SLICE>
unsigned long long probe_gmma() { return simtc_oracle::gmma_desc<T, M, S, MN, K, KS, SLICE>(); }

#define SIMTC_CASE(ID, T, M, S, MN, K, KS, SLICE, DO_UMMA, DO_GMMA)
#define SIMTC_PROBE_UMMA(ID, T, M, S, MN, K, KS, SLICE) \
  sink += probe_umma<ID, T, simtc_oracle::Mj::M, simtc_oracle::Sw::S, MN, K, KS, SLICE>();
#define SIMTC_PROBE_GMMA(ID, T, M, S, MN, K, KS, SLICE) \
  sink += probe_gmma<ID, T, simtc_oracle::Mj::M, simtc_oracle::Sw::S, MN, K, KS, SLICE>();

int main() {
  unsigned long long sink = 0;
#include SIMTC_CASES
  return int(sink & 1);
}

#endif  // SIMTC_PROBE
