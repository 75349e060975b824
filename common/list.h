/* SPDX-License-Identifier: MIT */
/* Doubly linked lists threaded through their items' own pointer fields, in the manner of
 * systemd's list.h: an item of several lists has a prev/next pair for each, and the
 * macros take the pair's field names. Arguments are evaluated more than once. */
#pragma once

#include <stddef.h>

/* item at the front of the list that head points to. */
#define LIST_PREPEND(prev, next, head, item)                                                                           \
        do {                                                                                                           \
                (item)->prev = NULL;                                                                                   \
                (item)->next = (head);                                                                                 \
                if (head)                                                                                              \
                        (head)->prev = (item);                                                                         \
                (head) = (item);                                                                                       \
        } while (0)

/* item out of the list that head points to, its own pair cleared. */
#define LIST_REMOVE(prev, next, head, item)                                                                            \
        do {                                                                                                           \
                if ((item)->prev)                                                                                      \
                        (item)->prev->next = (item)->next;                                                             \
                else if ((head) == (item))                                                                             \
                        (head) = (item)->next;                                                                         \
                if ((item)->next)                                                                                      \
                        (item)->next->prev = (item)->prev;                                                             \
                (item)->prev = (item)->next = NULL;                                                                    \
        } while (0)
