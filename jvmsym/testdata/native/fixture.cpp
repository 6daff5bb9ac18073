// Source of the libfixture*.so test fixtures; rebuild them with build.sh.
// Functions are 256-byte aligned so that the padding after each is an
// address no symbol covers.

#define FN __attribute__((noinline, aligned(256)))

namespace gc {

struct G1ParScanThreadState {
  int trim_queue_to_threshold(int n);
};

FN int G1ParScanThreadState::trim_queue_to_threshold(int n) { return n * 3 + 1; }

template <typename T>
struct Closure {
  FN T apply(T v) { return v + 1; }
};

template struct Closure<long>;

}  // namespace gc

extern "C" FN int plain_c_function(int x) { return x ^ 0x55; }

// Local: only in .symtab, so the stripped fixture has no name for it.
static __attribute__((noinline, used, aligned(256))) int local_helper(int x) { return x + 7; }
