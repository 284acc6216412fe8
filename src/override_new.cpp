/*
 * override_new.cpp — C++ operator new/delete in every standard variant: the
 * only file exporting C++ names.
 *
 * Promises: new returns hakmem memory or, after the new-handler gave up,
 * throws std::bad_alloc; nothrow new returns nullptr; delete in every form
 * frees. The library links no libstdc++: on failure the new-handler and the
 * bad_alloc thrower are looked up in the running program (a program calling
 * operator new has libstdc++ loaded). nothrow new does not call the
 * new-handler (a handler may throw, and catching it would need libstdc++).
 * May call: the hidden api_* functions of api.c.
 */
#include <cstddef>
#include <cstdlib>
#include <new>

#include <dlfcn.h>
#include <unistd.h>

/* noexcept: they never throw, and saying so keeps the noexcept operators
 * free of terminate handlers (which would pull in libstdc++'s personality). */
extern "C" {
void *api_malloc(std::size_t size) noexcept;
void api_free(void *p) noexcept;
void *api_aligned(std::size_t align, std::size_t size) noexcept;
}

#define HAK_CXX_EXPORT __attribute__((visibility("default")))
/* internal.h's HAK_TEXT_COLD / HAK_RODATA_COLD (src/layout.ld): failure
 * paths, apart from the code every process runs. */
#define HAK_CXX_TEXT_COLD __attribute__((cold, noinline, section(".text.hak_cold")))
#define HAK_CXX_RODATA_COLD __attribute__((section(".rodata.hak_cold")))

namespace {

typedef std::new_handler (*get_handler_fn)();
typedef void (*throw_fn)();

[[noreturn]] HAK_CXX_TEXT_COLD void cxx_throw_bad_alloc() {
  /* std::__throw_bad_alloc() from libstdc++ (or libc++'s equivalent). */
  void *f = dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv");
  if (f != nullptr) reinterpret_cast<throw_fn>(f)();
  static const char msg[] HAK_CXX_RODATA_COLD =
      "hakmem: operator new failed and std::bad_alloc is unavailable\n";
  ssize_t r = write(2, msg, sizeof msg - 1);
  (void)r;
  std::abort();
}

HAK_CXX_TEXT_COLD void *cxx_new_fail(std::size_t size, std::size_t align) {
  for (;;) {
    void *f = dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv");
    std::new_handler h = f ? reinterpret_cast<get_handler_fn>(f)() : nullptr;
    if (h == nullptr) cxx_throw_bad_alloc();
    h();
    void *p = align ? api_aligned(align, size) : api_malloc(size);
    if (p != nullptr) return p;
  }
}

inline void *cxx_new(std::size_t size) {
  void *p = api_malloc(size);
  if (__builtin_expect(p != nullptr, 1)) return p;
  return cxx_new_fail(size, 0);
}

inline void *cxx_new_aligned(std::size_t size, std::align_val_t al) {
  std::size_t a = static_cast<std::size_t>(al);
  void *p = api_aligned(a, size);
  if (__builtin_expect(p != nullptr, 1)) return p;
  return cxx_new_fail(size, a);
}

}  // namespace

HAK_CXX_EXPORT void *operator new(std::size_t n) { return cxx_new(n); }
HAK_CXX_EXPORT void *operator new[](std::size_t n) { return cxx_new(n); }
HAK_CXX_EXPORT void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  return api_malloc(n);
}
HAK_CXX_EXPORT void *operator new[](std::size_t n, const std::nothrow_t &) noexcept {
  return api_malloc(n);
}
HAK_CXX_EXPORT void *operator new(std::size_t n, std::align_val_t a) { return cxx_new_aligned(n, a); }
HAK_CXX_EXPORT void *operator new[](std::size_t n, std::align_val_t a) {
  return cxx_new_aligned(n, a);
}
HAK_CXX_EXPORT void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return api_aligned(static_cast<std::size_t>(a), n);
}
HAK_CXX_EXPORT void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return api_aligned(static_cast<std::size_t>(a), n);
}

HAK_CXX_EXPORT void operator delete(void *p) noexcept { api_free(p); }
HAK_CXX_EXPORT void operator delete[](void *p) noexcept { api_free(p); }
HAK_CXX_EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept { api_free(p); }
HAK_CXX_EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept { api_free(p); }
HAK_CXX_EXPORT void operator delete(void *p, std::size_t) noexcept { api_free(p); }
HAK_CXX_EXPORT void operator delete[](void *p, std::size_t) noexcept { api_free(p); }
HAK_CXX_EXPORT void operator delete(void *p, std::align_val_t) noexcept { api_free(p); }
HAK_CXX_EXPORT void operator delete[](void *p, std::align_val_t) noexcept { api_free(p); }
HAK_CXX_EXPORT void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  api_free(p);
}
HAK_CXX_EXPORT void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  api_free(p);
}
HAK_CXX_EXPORT void operator delete(void *p, std::size_t, std::align_val_t) noexcept {
  api_free(p);
}
HAK_CXX_EXPORT void operator delete[](void *p, std::size_t, std::align_val_t) noexcept {
  api_free(p);
}
