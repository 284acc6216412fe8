// badfree_cxx.cpp — C++ entry points for test_death (libhakmem.so build):
// operator delete of a bad pointer (an interior pointer, a freed block).
#include <cstddef>
#include <new>

extern "C" void cxx_delete(void *p) { ::operator delete(p); }
extern "C" void cxx_delete_sized(void *p, std::size_t n) { ::operator delete(p, n); }
