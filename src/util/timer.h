/* Monotonic time. */
#ifndef INF_UTIL_TIMER_H
#define INF_UTIL_TIMER_H

#include <stdint.h>
#include <time.h>

static inline uint64_t inf_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static inline double inf_now_s(void) {
    return (double)inf_now_ns() * 1e-9;
}

#endif
