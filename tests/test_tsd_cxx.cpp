// test_tsd_cxx.cpp — C++ thread_local objects whose destructors allocate and
// free at thread exit, against libhakmem.so:
//   - a thread_local constructed in the thread body (its destructor runs
//     from __call_tls_dtors, before the pthread key destructors, so before
//     hakmem's own cleanup);
//   - a thread_local first used inside a pthread key destructor created
//     after the first malloc, i.e. after hakmem's cleanup of the thread;
//   - a pthread key destructor that destroys a std::map / std::string built
//     by the thread (frees after hakmem's cleanup).
// Contents are verified; blocks cross threads; thousands of threads.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#define CHECK(c, ...)                                                     \
  do {                                                                    \
    if (!(c)) {                                                           \
      std::fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #c); \
      std::fprintf(stderr, __VA_ARGS__);                                  \
      std::fputc('\n', stderr);                                           \
      _exit(1);                                                           \
    }                                                                     \
  } while (0)

static std::mutex mu;
static std::vector<std::string> *collected; // strings built by destructors
static std::atomic<unsigned long> tl_dtors{0}, late_tl_dtors{0}, key_dtors{0};

static std::string make_str(unsigned long id, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; i++) s.push_back(char('a' + (id + i) % 26));
  return s;
}
static bool check_str(const std::string &s, unsigned long id) {
  for (size_t i = 0; i < s.size(); i++)
    if (s[i] != char('a' + (id + i) % 26)) return false;
  return true;
}

struct Holder {
  unsigned long id = 0;
  std::vector<std::unique_ptr<std::string>> v;
  std::map<int, std::string> m;
  std::atomic<unsigned long> *counter;
  explicit Holder(std::atomic<unsigned long> *c) : counter(c) {}
  void fill(unsigned long i) {
    id = i;
    for (int k = 0; k < 20; k++) v.emplace_back(new std::string(make_str(id + k, 10 + 37 * k)));
    for (int k = 0; k < 20; k++) m[k] = make_str(id * 3 + k, 100 + k);
  }
  ~Holder() {
    if (id == 0) return;
    for (int k = 0; k < 20; k++) CHECK(check_str(*v[k], id + k), "thread_local vector element damaged");
    for (int k = 0; k < 20; k++) CHECK(check_str(m[k], id * 3 + k), "thread_local map element damaged");
    // allocate during destruction and hand a result to the main thread
    std::string s = make_str(id, 500);
    {
      std::lock_guard<std::mutex> g(mu);
      collected->push_back(s);
    }
    (*counter)++;
  }
};

static thread_local Holder tl_holder(&tl_dtors);
static thread_local Holder late_holder(&late_tl_dtors);
static pthread_key_t late_key;

struct KeyData {
  unsigned long id;
  std::map<int, std::string> m;
};

static void late_destructor(void *arg) {
  KeyData *d = static_cast<KeyData *>(arg);
  for (auto &kv : d->m) CHECK(check_str(kv.second, d->id + unsigned(kv.first)), "key data damaged");
  // first use of a thread_local after hakmem's cleanup of this thread
  late_holder.fill(d->id + 7);
  delete d;
  key_dtors++;
}

static void *body(void *arg) {
  unsigned long id = (unsigned long)(uintptr_t)arg;
  tl_holder.fill(id);
  KeyData *d = new KeyData;
  d->id = id;
  for (int k = 0; k < 30; k++) d->m[k] = make_str(id + unsigned(k), 16 + 13 * k);
  pthread_setspecific(late_key, d);
  return nullptr;
}

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? unsigned(std::atoi(argv[1])) : 300, width = 8;
  collected = new std::vector<std::string>();
  std::string warm = make_str(1, 100); // the first malloc before the key
  CHECK(pthread_key_create(&late_key, late_destructor) == 0, "pthread_key_create");
  unsigned long n = 0;
  for (unsigned r = 0; r < rounds; r++) {
    pthread_t th[8];
    for (unsigned i = 0; i < width; i++) {
      n++;
      CHECK(pthread_create(&th[i], nullptr, body, (void *)(uintptr_t)(n * 1000)) == 0, "pthread_create");
    }
    for (unsigned i = 0; i < width; i++) pthread_join(th[i], nullptr);
    std::lock_guard<std::mutex> g(mu);
    for (auto &s : *collected) CHECK(s.size() == 500, "collected string size %zu", s.size());
    collected->clear();
    collected->shrink_to_fit();
  }
  std::printf("test_tsd_cxx: %lu threads; thread_local destructors %lu, thread_locals first used in a late key "
              "destructor %lu, key destructors %lu\n",
              n, tl_dtors.load(), late_tl_dtors.load(), key_dtors.load());
  CHECK(tl_dtors == n, "thread_local destructors %lu of %lu", tl_dtors.load(), n);
  CHECK(key_dtors == n, "key destructors %lu of %lu", key_dtors.load(), n);
  // glibc never runs the destructor of a thread_local constructed after the
  // thread's TLS destructors ran (the same without hakmem): not asserted.
  CHECK(late_tl_dtors <= n, "late thread_local destructors %lu of %lu", late_tl_dtors.load(), n);
  delete collected;
  return 0;
}
