/*
 * override.c — replaces the C library's allocator: the only C file that
 * exports libc names. It is api.c compiled once more with the aliases
 * switched on (libhakmem.so / libhakmem.a use this file instead of api.c;
 * the hak_-only library uses api.c).
 */
#define HAK_WITH_OVERRIDE 1
#include "api.c"
