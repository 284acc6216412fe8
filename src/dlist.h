/*
 * dlist.h — the one intrusive doubly linked list of src/: a head and a
 * tail over elements that carry a pointer to the previous and the next
 * element of their own type.
 *
 * Owns: nothing (header-only). DLIST_DEFINE(name, type, prev, next)
 * defines static inline operations on a list of elements of `type` linked
 * through their fields `prev` and `next`, the list being a head and a tail
 * pointer the caller keeps where it likes (heap_t keeps its heads in one
 * array and its tails in another, so that the refill indexes them in one
 * instruction): name_push_back(&head, &tail, e), name_push_front,
 * name_remove and name_pop_front. One element may sit on several lists
 * through different fields (superslab_t is on its heap's list and on the
 * registry).
 * Promises: O(1) each; the ends are NULL-terminated (DLIST_DEFINE_HEAD:
 * the last next; the first prev is the last element); a removed element has
 * prev and next NULL. An element is on at most one list per pair of fields,
 * and the caller says which (no list pointer in the element). No locking:
 * the caller's. May call: nothing.
 *
 * Inline always: heap.c's refill moves slabs between lists on its path,
 * where the hand-written versions were inlined too.
 */
#ifndef HAK_DLIST_H
#define HAK_DLIST_H

#include <stddef.h> /* NULL */

#define DLIST_DEFINE(name, type, prev, next)                                               \
  static inline __attribute__((always_inline)) void name##_push_back(type **head, type **tail, \
                                                                     type *e) {                \
    e->next = NULL;                                                                            \
    e->prev = *tail;                                                                           \
    if (e->prev)                                                                               \
      e->prev->next = e;                                                                       \
    else                                                                                       \
      *head = e;                                                                               \
    *tail = e;                                                                                 \
  }                                                                                            \
  static inline __attribute__((always_inline)) void name##_push_front(type **head, type **tail, \
                                                                      type *e) {                \
    e->prev = NULL;                                                                            \
    e->next = *head;                                                                           \
    if (e->next)                                                                               \
      e->next->prev = e;                                                                       \
    else                                                                                       \
      *tail = e;                                                                               \
    *head = e;                                                                                 \
  }                                                                                            \
  static inline __attribute__((always_inline)) void name##_remove(type **head, type **tail,    \
                                                                  type *e) {                   \
    if (e->prev)                                                                               \
      e->prev->next = e->next;                                                                 \
    else                                                                                       \
      *head = e->next;                                                                         \
    if (e->next)                                                                               \
      e->next->prev = e->prev;                                                                 \
    else                                                                                       \
      *tail = e->prev;                                                                         \
    e->next = e->prev = NULL;                                                                  \
  }                                                                                            \
  static inline __attribute__((always_inline)) type *name##_pop_front(type **head, type **tail) { \
    type *e = *head;                                                                           \
    if (e) name##_remove(head, tail, e);                                                       \
    return e;                                                                                  \
  }

/* DLIST_DEFINE_HEAD(name, type, prev, next): the same list kept by its head
 * alone, half the pointers a caller keeps per list (heap_t holds 128 slab
 * lists: 1 KiB less, one page per heap instead of two): the first
 * element's prev is the last element, every other prev and the last next
 * as above. name_push_back(&head, e), name_push_front, name_remove,
 * name_pop_front, name_tail(head). */
#define DLIST_DEFINE_HEAD(name, type, prev, next)                                          \
  static inline __attribute__((always_inline)) void name##_push_back(type **head, type *e) { \
    type *h = *head;                                                                       \
    e->next = NULL;                                                                        \
    if (h) {                                                                               \
      e->prev = h->prev;                                                                   \
      h->prev->next = e;                                                                   \
      h->prev = e;                                                                         \
    } else {                                                                               \
      e->prev = e;                                                                         \
      *head = e;                                                                           \
    }                                                                                      \
  }                                                                                        \
  static inline __attribute__((always_inline)) void name##_push_front(type **head, type *e) { \
    type *h = *head;                                                                       \
    e->next = h;                                                                           \
    if (h) {                                                                               \
      e->prev = h->prev;                                                                   \
      h->prev = e;                                                                         \
    } else {                                                                               \
      e->prev = e;                                                                         \
    }                                                                                      \
    *head = e;                                                                             \
  }                                                                                        \
  static inline __attribute__((always_inline)) void name##_remove(type **head, type *e) {  \
    type *h = *head;                                                                       \
    if (e == h) {                                                                          \
      *head = e->next;                                                                     \
      if (e->next) e->next->prev = e->prev;                                                \
    } else {                                                                               \
      e->prev->next = e->next;                                                             \
      if (e->next)                                                                         \
        e->next->prev = e->prev;                                                           \
      else                                                                                 \
        h->prev = e->prev;                                                                 \
    }                                                                                      \
    e->next = e->prev = NULL;                                                              \
  }                                                                                        \
  static inline __attribute__((always_inline)) type *name##_pop_front(type **head) {       \
    type *e = *head;                                                                       \
    if (e) name##_remove(head, e);                                                         \
    return e;                                                                              \
  }                                                                                        \
  static inline __attribute__((always_inline)) type *name##_tail(type *head) {             \
    return head ? head->prev : NULL;                                                       \
  }

#endif
