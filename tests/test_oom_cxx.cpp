// test_oom_cxx.cpp — C++ out of memory against libhakmem.so: operator new
// throws std::bad_alloc (huge sizes, and under a lowered RLIMIT_AS), the
// nothrow forms return nullptr, aligned forms too, std::vector growth throws,
// and allocation works again after the memory is released. Each section runs
// in a forked child.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#define FAIL(...)                                                    \
  do {                                                               \
    std::fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);             \
    std::fprintf(stderr, __VA_ARGS__);                               \
    std::fputc('\n', stderr);                                        \
    _exit(1);                                                        \
  } while (0)
#define CHECK(c, ...) do { if (!(c)) FAIL("CHECK(" #c ") failed: " __VA_ARGS__); } while (0)

static size_t opaque(size_t x) { __asm__ volatile("" : "+r"(x)); return x; }
// new/delete pairs may be elided by the compiler: let every pointer escape
static void *volatile sink;
template <class T> static T *esc(T *p) { sink = p; return p; }
static const size_t MiB = size_t(1) << 20;

static size_t vm_size() {
  FILE *f = std::fopen("/proc/self/statm", "r");
  unsigned long s = 0;
  CHECK(f && std::fscanf(f, "%lu", &s) == 1, "statm");
  std::fclose(f);
  return s * size_t(sysconf(_SC_PAGESIZE));
}

static void limit_as(size_t extra) {
  size_t lim = vm_size() + extra;
  rlimit rl = {lim, lim};
  CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit");
}

template <class F> static bool throws_bad_alloc(F f) {
  try {
    f();
  } catch (const std::bad_alloc &) {
    return true;
  }
  return false;
}

static void sec_huge() {
  CHECK(throws_bad_alloc([] { char *p = esc(new char[opaque(SIZE_MAX / 2)]); delete[] p; }), "new char[SIZE_MAX/2]");
  CHECK(throws_bad_alloc([] { char *p = esc(new char[opaque(SIZE_MAX - 8)]); delete[] p; }), "new char[SIZE_MAX-8]");
  CHECK(throws_bad_alloc([] { void *p = ::operator new(opaque(SIZE_MAX - 8)); ::operator delete(p); }),
        "operator new(SIZE_MAX-8)");
  CHECK(throws_bad_alloc([] {
          void *p = ::operator new(opaque(SIZE_MAX - 8), std::align_val_t(64));
          ::operator delete(p, std::align_val_t(64));
        }), "aligned operator new(SIZE_MAX-8)");
  CHECK(throws_bad_alloc([] {
          void *p = ::operator new[](opaque(SIZE_MAX / 2), std::align_val_t(4096));
          ::operator delete[](p, std::align_val_t(4096));
        }), "aligned operator new[](SIZE_MAX/2)");
  void *p = ::operator new(opaque(SIZE_MAX - 8), std::nothrow);
  CHECK(p == nullptr, "nothrow new(SIZE_MAX-8) = %p", p);
  p = ::operator new[](opaque(SIZE_MAX / 2), std::nothrow);
  CHECK(p == nullptr, "nothrow new[](SIZE_MAX/2) = %p", p);
  p = ::operator new(opaque(SIZE_MAX - 8), std::align_val_t(256), std::nothrow);
  CHECK(p == nullptr, "aligned nothrow new = %p", p);
  // array new with an overflowing element count: std::bad_array_new_length (a bad_alloc)
  CHECK(throws_bad_alloc([] {
          size_t n = opaque(SIZE_MAX / 4);
          uint64_t *a = esc(new uint64_t[n]);
          delete[] a;
        }), "new uint64_t[SIZE_MAX/4]");
  std::printf("huge: bad_alloc for absurd sizes, nullptr from the nothrow forms\n");
}

static void sec_limit() {
  std::vector<char *> *keep = new std::vector<char *>();
  keep->reserve(100000);
  limit_as(256 * MiB);
  size_t n = 0;
  bool threw = false;
  try {
    for (;;) {
      char *p = new char[MiB];
      std::memset(p, int(n & 0xff), 4096);
      CHECK(keep->size() < keep->capacity(), "no bad_alloc after %zu MiB: limit ineffective", keep->size());
      keep->push_back(p);
      n++;
    }
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  CHECK(threw && n > 10, "bad_alloc after %zu blocks", n);
  // nothrow forms give nullptr now
  void *q = ::operator new(64 * MiB, std::nothrow);
  CHECK(q == nullptr, "nothrow new under the limit = %p", q);
  q = ::operator new[](64 * MiB, std::align_val_t(1 << 20), std::nothrow);
  CHECK(q == nullptr, "aligned nothrow new under the limit = %p", q);
  // a vector growing into the limit throws and stays valid
  std::vector<int> v(1000, 7);
  CHECK(throws_bad_alloc([&] { v.resize(64 * MiB); }), "vector::resize under the limit");
  CHECK(v.size() == 1000 && v[999] == 7, "vector damaged by the failed resize");
  for (size_t i = 0; i < keep->size(); i++) {
    CHECK((unsigned char)(*keep)[i][4095] == (unsigned char)(i & 0xff), "block %zu damaged", i);
    delete[] (*keep)[i];
  }
  keep->clear();
  // works again
  char *big = esc(new char[64 * MiB]);
  std::memset(big, 1, 64 * MiB);
  delete[] big;
  std::vector<int> w(16 * MiB, 3);
  CHECK(w.back() == 3, "vector after OOM");
  std::printf("limit: %zu x 1 MiB before bad_alloc; nothrow -> nullptr; works again after delete\n", n);
  delete keep;
}

// new_handler: called on failure; it releases a reserve and the retry succeeds
static char *reserve;
static int handler_calls;
static void release_reserve() {
  handler_calls++;
  if (reserve) {
    delete[] reserve;
    reserve = nullptr;
  } else {
    std::set_new_handler(nullptr);
  }
}

static void sec_handler() {
  reserve = new char[128 * MiB];
  std::memset(reserve, 1, 4096);
  limit_as(32 * MiB);
  std::set_new_handler(release_reserve);
  char *p = esc(new char[opaque(100 * MiB)]); // fails, handler frees the reserve, retry succeeds
  CHECK(handler_calls >= 1 && reserve == nullptr, "new_handler calls %d", handler_calls);
  p[100 * MiB - 1] = 1;
  delete[] p;
  CHECK(throws_bad_alloc([] { char *q = esc(new char[opaque(1024 * MiB)]); delete[] q; }),
        "bad_alloc once the handler has nothing left");
  std::printf("handler: new_handler called %d time(s), the retry succeeded\n", handler_calls);
}

int main(int argc, char **argv) {
  struct { const char *name; void (*fn)(); } secs[] = {{"huge", sec_huge}, {"limit", sec_limit}, {"handler", sec_handler}};
  int fails = 0;
  for (auto &s : secs) {
    if (argc > 1 && std::strcmp(argv[1], s.name) != 0) continue;
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      s.fn();
      std::fflush(stdout);
      _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      std::fprintf(stderr, "FAIL: section %s: status 0x%x\n", s.name, st);
      fails++;
    }
  }
  std::printf("test_oom_cxx: %d section(s) failed\n", fails);
  return fails != 0;
}
