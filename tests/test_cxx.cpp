// test_cxx.cpp — C++ operator new/delete replacement (linked against
// libhakmem.so): every operator variant, standard containers, and the
// failure behaviour (std::bad_alloc / nullptr for nothrow).
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

extern "C" {
#include "check.h"
#include "hakmem.h"
}

static bool owns(const void *p) { return hak_owns(opaque_ptr(p)) != 0; }

static void check_new_block(void *p, std::size_t n, std::size_t align, const char *what)
{
  CHECK(p != nullptr, "%s(%zu, align %zu) returned nullptr", what, n, align);
  CHECK((reinterpret_cast<std::uintptr_t>(p) & 15) == 0, "%s(%zu) = %p not 16-byte aligned", what, n, p);
  if (align)
    CHECK((reinterpret_cast<std::uintptr_t>(p) & (align - 1)) == 0, "%s(%zu, align %zu) = %p misaligned", what, n,
          align, p);
  CHECK(owns(p), "%s(%zu) = %p is not a hakmem block: operator new is not replaced", what, n, p);
  CHECK(hak_usable_size(p) >= n, "%s(%zu): usable size %zu", what, n, hak_usable_size(p));
  std::memset(p, 0x5c, n);
}

static void test_plain()
{
  static const std::size_t sizes[] = { 0, 1, 7, 16, 24, 100, 1000, 4096, 65537, 1 << 20, (8 << 20) + 3 };
  for (std::size_t n0 : sizes) {
    std::size_t n = opaque_size(n0);
    void *p = ::operator new(n);
    check_new_block(p, n, 0, "operator new");
    ::operator delete(p);

    p = ::operator new[](n);
    check_new_block(p, n, 0, "operator new[]");
    ::operator delete[](p);

    p = ::operator new(n, std::nothrow);
    check_new_block(p, n, 0, "operator new(nothrow)");
    ::operator delete(p, std::nothrow);

    p = ::operator new[](n, std::nothrow);
    check_new_block(p, n, 0, "operator new[](nothrow)");
    ::operator delete[](p, std::nothrow);

    p = ::operator new(n);
    check_new_block(p, n, 0, "operator new");
    ::operator delete(p, n);  // sized

    p = ::operator new[](n);
    check_new_block(p, n, 0, "operator new[]");
    ::operator delete[](p, n);  // sized array
  }
  // new-expressions
  struct S { char c[40]; std::uint64_t v; };
  S *s = new S();
  CHECK(owns(s) && s->v == 0, "new S() not from hakmem / not value-initialised");
  delete s;
  int *arr = new int[1000]();
  CHECK(owns(arr), "new int[1000] not from hakmem");
  for (int i = 0; i < 1000; i++) CHECK(arr[i] == 0, "new int[1000]() element %d = %d", i, arr[i]);
  delete[] arr;
}

struct alignas(64) Al64 { char c[100]; };
struct alignas(4096) AlPage { char c[10]; };

static void test_aligned()
{
  for (std::size_t a = 16; a <= (std::size_t(1) << 20); a <<= 1) {
    std::align_val_t al{ a };
    static const std::size_t sizes[] = { 1, 16, 100, 4096 + 1, 100000 };
    for (std::size_t n0 : sizes) {
      std::size_t n = opaque_size(n0);
      void *p = ::operator new(n, al);
      check_new_block(p, n, a, "operator new(align)");
      ::operator delete(p, al);

      p = ::operator new[](n, al);
      check_new_block(p, n, a, "operator new[](align)");
      ::operator delete[](p, al);

      p = ::operator new(n, al);
      check_new_block(p, n, a, "operator new(align)");
      ::operator delete(p, n, al);  // sized + aligned

      p = ::operator new[](n, al);
      check_new_block(p, n, a, "operator new[](align)");
      ::operator delete[](p, n, al);

      p = ::operator new(n, al, std::nothrow);
      check_new_block(p, n, a, "operator new(align, nothrow)");
      ::operator delete(p, al, std::nothrow);

      p = ::operator new[](n, al, std::nothrow);
      check_new_block(p, n, a, "operator new[](align, nothrow)");
      ::operator delete[](p, al, std::nothrow);
    }
  }
  Al64 *x = new Al64;
  check_new_block(x, sizeof *x, 64, "new Al64");
  delete x;
  AlPage *y = new AlPage[7];
  check_new_block(y, sizeof(AlPage) * 7, 4096, "new AlPage[7]");
  delete[] y;
  auto up = std::make_unique<AlPage>();
  CHECK(owns(up.get()) && (reinterpret_cast<std::uintptr_t>(up.get()) & 4095) == 0, "make_unique<AlPage>");
}

static void test_failure()
{
  static const std::size_t absurd[] = { SIZE_MAX / 2, SIZE_MAX, SIZE_MAX - 8, std::size_t(PTRDIFF_MAX) + 1 };
  for (std::size_t n0 : absurd) {
    std::size_t n = opaque_size(n0);
    bool thrown = false;
    try {
      void *p = ::operator new(n);
      CHECK(0, "operator new(%zu) returned %p instead of throwing", n, p);
    } catch (const std::bad_alloc &) {
      thrown = true;
    }
    CHECK(thrown, "operator new(%zu) did not throw std::bad_alloc", n);
    thrown = false;
    try {
      void *p = ::operator new[](n);
      CHECK(0, "operator new[](%zu) returned %p instead of throwing", n, p);
    } catch (const std::bad_alloc &) {
      thrown = true;
    }
    CHECK(thrown, "operator new[](%zu) did not throw", n);
    thrown = false;
#ifdef GLIBC_REFERENCE  // libstdc++'s own aligned new wraps SIZE_MAX round-up to 0
    if (n > SIZE_MAX - 4096) continue;
#endif
    try {
      void *p = ::operator new(n, std::align_val_t{ 256 });
      CHECK(0, "operator new(%zu, align 256) returned %p instead of throwing", n, p);
    } catch (const std::bad_alloc &) {
      thrown = true;
    }
    CHECK(thrown, "aligned operator new(%zu) did not throw", n);

    void *p = ::operator new(n, std::nothrow);
    CHECK(p == nullptr, "operator new(%zu, nothrow) = %p, want nullptr", n, p);
    p = ::operator new[](n, std::nothrow);
    CHECK(p == nullptr, "operator new[](%zu, nothrow) = %p, want nullptr", n, p);
    p = ::operator new(n, std::align_val_t{ 4096 }, std::nothrow);
    CHECK(p == nullptr, "operator new(%zu, align 4096, nothrow) = %p, want nullptr", n, p);
  }
  // array new-expression with an overflowing element count
  bool thrown = false;
  try {
    std::size_t cnt = opaque_size(SIZE_MAX / 4);
    std::uint64_t *q = new std::uint64_t[cnt];
    CHECK(0, "new uint64_t[SIZE_MAX/4] returned %p", static_cast<void *>(q));
  } catch (const std::bad_alloc &) {  // std::bad_array_new_length derives from bad_alloc
    thrown = true;
  }
  CHECK(thrown, "new uint64_t[SIZE_MAX/4] did not throw");
}

static int handler_calls;
static void my_new_handler()
{
  handler_calls++;
  std::set_new_handler(nullptr);  // next failure throws
}

static void test_new_handler()
{
  std::set_new_handler(my_new_handler);
  bool thrown = false;
  try {
    void *p = ::operator new(opaque_size(SIZE_MAX / 2));
    CHECK(0, "operator new(SIZE_MAX/2) returned %p", p);
  } catch (const std::bad_alloc &) {
    thrown = true;
  }
  CHECK(thrown, "operator new did not throw after the new-handler removed itself");
  CHECK(handler_calls == 1, "new-handler called %d times, want 1", handler_calls);
  std::set_new_handler(nullptr);
}

static void test_containers()
{
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = 0; i < 2000000; i++) {
    v.push_back(i * 2654435761u);
    if ((i & (i - 1)) == 0) CHECK(owns(v.data()), "vector storage (size %zu) not from hakmem", v.size());
  }
  for (std::uint64_t i = 0; i < v.size(); i++) CHECK(v[i] == i * 2654435761u, "vector[%zu] corrupted", (size_t)i);
  v.shrink_to_fit();
  CHECK(owns(v.data()), "vector after shrink_to_fit");

  std::string s;
  for (int i = 0; i < 200000; i++) s += static_cast<char>('a' + i % 26);
  CHECK(owns(s.data()), "std::string storage not from hakmem");
  for (int i = 0; i < 200000; i++) CHECK(s[i] == static_cast<char>('a' + i % 26), "string[%d] corrupted", i);

  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < 50000; i++) {
    std::string k = "key-" + std::to_string(i * 7919 % 50000) + std::string(i % 50, 'x');
    m[k].push_back(i);
  }
  CHECK(m.size() == 50000, "map size %zu", m.size());
  CHECK(owns(&*m.begin()), "map node not from hakmem");
  long sum = 0;
  for (auto &kv : m) for (int x : kv.second) sum += x;
  CHECK(sum == 50000L * 49999 / 2, "map contents sum %ld", sum);
  for (int i = 0; i < 50000; i += 2) {
    std::string k = "key-" + std::to_string(i * 7919 % 50000) + std::string(i % 50, 'x');
    CHECK(m.erase(k) == 1, "map erase %d", i);
  }
  CHECK(m.size() == 25000, "map size after erase %zu", m.size());

  std::unordered_map<int, std::string> um;
  for (int i = 0; i < 100000; i++) um.emplace(i, std::string(static_cast<std::size_t>(i % 300), 'q'));
  for (int i = 0; i < 100000; i++) CHECK(um.at(i).size() == static_cast<std::size_t>(i % 300), "unordered_map %d", i);

  auto sp = std::make_shared<std::vector<std::string>>(1000, std::string(100, 'z'));
  CHECK(owns(sp.get()) && owns((*sp)[999].data()), "make_shared / nested string not from hakmem");
}

// thread_local objects whose destructors allocate and free at thread exit;
// containers built in one thread and destroyed in another
struct TlsHolder {
  std::vector<std::string> v;
  ~TlsHolder()
  {
    std::string s(5000, 'd');  // allocate during thread teardown
    v.emplace_back(s);
    CHECK(owns(v.back().data()), "allocation in a thread_local destructor not from hakmem");
  }
};
static thread_local TlsHolder tls_holder;

static void test_threads()
{
  std::vector<std::unique_ptr<std::map<int, std::string>>> made(8);
  std::vector<std::thread> th;
  for (int t = 0; t < 8; t++) {
    th.emplace_back([t, &made] {
      tls_holder.v.assign(100, std::string(static_cast<std::size_t>(t) * 10 + 20, 'a'));
      auto m = std::make_unique<std::map<int, std::string>>();
      for (int i = 0; i < 20000; i++) (*m)[i * 7 + t] = std::to_string(i) + std::string(static_cast<std::size_t>(i % 64), 'm');
      made[static_cast<std::size_t>(t)] = std::move(m);
    });
  }
  for (auto &x : th) x.join();
  th.clear();
  // free every map from a different thread than the one that built it
  for (int t = 0; t < 8; t++) {
    th.emplace_back([t, &made] {
      auto &m = made[static_cast<std::size_t>((t + 3) % 8)];
      int tt = (t + 3) % 8;
      CHECK(m->size() == 20000, "map size %zu", m->size());
      for (int i = 0; i < 20000; i += 97) {
        const std::string &v = m->at(i * 7 + tt);
        CHECK(v == std::to_string(i) + std::string(static_cast<std::size_t>(i % 64), 'm'), "map value %d", i);
      }
      m.reset();
    });
  }
  for (auto &x : th) x.join();
}

// destroyed after main returns: frees hakmem memory during exit
static std::map<int, std::vector<std::string>> g_destroyed_at_exit;

int main()
{
  for (int i = 0; i < 2000; i++) g_destroyed_at_exit[i].assign(3, std::string(static_cast<std::size_t>(i % 500) + 20, 'e'));
  static const struct {
    const char *name;
    void (*run)();
  } parts[] = {{"plain", test_plain},           {"aligned", test_aligned},       {"failure", test_failure},
               {"new_handler", test_new_handler}, {"containers", test_containers}, {"threads", test_threads}};
  for (const auto &p : parts) {
    std::printf("test_cxx: %s\n", p.name);
    p.run();
  }
  std::printf("test_cxx: all passed\n");
  return 0;
}
