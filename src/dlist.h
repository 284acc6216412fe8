/*
 * dlist.h — the one intrusive doubly linked list of src/: a head and a
 * tail over elements that carry a pointer to the previous and the next
 * element of their own type.
 *
 * Owns: nothing (header-only). DLIST_DEFINE(name, type, prev, next)
 * defines the list type name##_t ({head, tail}) and its static inline
 * operations name##_push_back, name##_push_front, name##_remove and
 * name##_pop_front, for elements of `type` linked through their fields
 * `prev` and `next` (one element may sit on several lists through
 * different fields: superslab_t is on its heap's list and on the registry).
 * Promises: O(1) each; the ends are NULL-terminated; a removed element has
 * prev and next NULL. An element is on at most one list per pair of fields,
 * and the caller says which (no list pointer in the element). No locking:
 * the caller's. May call: nothing.
 *
 * Inline always: heap.c's refill moves slabs between lists on its path,
 * where the hand-written versions were inlined too.
 */
#ifndef HAK_DLIST_H
#define HAK_DLIST_H

#include <stddef.h>

#define DLIST_DEFINE(name, type, prev, next)                                              \
  typedef struct name {                                                                   \
    type *head, *tail;                                                                    \
  } name##_t;                                                                             \
  static inline __attribute__((always_inline)) void name##_push_back(name##_t *l, type *e) { \
    e->next = NULL;                                                                       \
    e->prev = l->tail;                                                                    \
    if (e->prev)                                                                          \
      e->prev->next = e;                                                                  \
    else                                                                                  \
      l->head = e;                                                                        \
    l->tail = e;                                                                          \
  }                                                                                       \
  static inline __attribute__((always_inline)) void name##_push_front(name##_t *l, type *e) { \
    e->prev = NULL;                                                                       \
    e->next = l->head;                                                                    \
    if (e->next)                                                                          \
      e->next->prev = e;                                                                  \
    else                                                                                  \
      l->tail = e;                                                                        \
    l->head = e;                                                                          \
  }                                                                                       \
  static inline __attribute__((always_inline)) void name##_remove(name##_t *l, type *e) { \
    if (e->prev)                                                                          \
      e->prev->next = e->next;                                                            \
    else                                                                                  \
      l->head = e->next;                                                                  \
    if (e->next)                                                                          \
      e->next->prev = e->prev;                                                            \
    else                                                                                  \
      l->tail = e->prev;                                                                  \
    e->next = e->prev = NULL;                                                             \
  }                                                                                       \
  static inline __attribute__((always_inline)) type *name##_pop_front(name##_t *l) {      \
    type *e = l->head;                                                                    \
    if (e) name##_remove(l, e);                                                           \
    return e;                                                                             \
  }

#endif
