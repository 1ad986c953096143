/* A plain test harness: CHECK macros that count, print expected vs actual on
 * failure, and a closing line "N passed, N failed". */
#ifndef INF_TEST_HARNESS_H
#define INF_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int th_passed, th_failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond)                                                                                  \
            th_passed++;                                                                           \
        else {                                                                                     \
            th_failed++;                                                                           \
            fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond);                     \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (cond)                                                                                  \
            th_passed++;                                                                           \
        else {                                                                                     \
            th_failed++;                                                                           \
            fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond);                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_INT(a, b)                                                                            \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        CHECK_MSG(va_ == vb_, "%s = %lld, expected %lld", #a, va_, vb_);                           \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *sa_ = (a), *sb_ = (b);                                                         \
        CHECK_MSG(sa_ &&sb_ && !strcmp(sa_, sb_), "%s = \"%s\", expected \"%s\"", #a,              \
                  sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                                     \
    } while (0)

/* Max-abs comparison of float arrays; reports the first index over tol. */
#define CHECK_CLOSE(a, b, n, tol)                                                                  \
    do {                                                                                           \
        const float *fa_ = (a), *fb_ = (b);                                                        \
        long n_ = (long)(n), bad_ = -1;                                                            \
        double max_ = 0;                                                                           \
        for (long i_ = 0; i_ < n_; i_++) {                                                         \
            double d_ = fabs((double)fa_[i_] - (double)fb_[i_]);                                   \
            if (!(d_ <= (tol)) && bad_ < 0) bad_ = i_;                                             \
            if (d_ > max_ || d_ != d_) max_ = d_;                                                  \
        }                                                                                          \
        CHECK_MSG(bad_ < 0, "%s vs %s: max abs diff %g > %g; first at [%ld]: %g vs %g", #a, #b,    \
                  max_, (double)(tol), bad_, bad_ >= 0 ? fa_[bad_] : 0.0,                          \
                  bad_ >= 0 ? fb_[bad_] : 0.0);                                                    \
    } while (0)

static inline int th_report(void) {
    printf("%d passed, %d failed\n", th_passed, th_failed);
    return th_failed ? 1 : 0;
}

#endif
