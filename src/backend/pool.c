/* Persistent thread pool: a job generation counter that workers watch
 * (spin, then futex sleep) and a pending counter the caller waits on. */
#include "backend/pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ITERS 20000 /* workers between jobs */
#define SPIN_WAIT 2000   /* the caller waiting for workers */

typedef struct worker {
    struct inf_pool *pool;
    int tid;
    pthread_t thread;
} worker;

#define CLOSED (1ull << 31)
#define ACTIVE_MASK (CLOSED - 1)

struct inf_pool {
    int n;
    worker *workers;        /* [n-1] */
    _Atomic unsigned gen;   /* bumped once per job (the futex word) */
    _Atomic uint64_t state; /* job generation << 32 | CLOSED | workers active in it */
    _Atomic int next;       /* next unclaimed chunk */
    _Atomic int sleeping;   /* workers inside futex wait */
    _Atomic unsigned done; /* bumped when the last active worker leaves a closed job (futex word) */
    _Atomic int caller_waiting;
    _Atomic int stop;
    inf_pool_fn fn; /* the current job; stable while any worker is active */
    void *arg;
    int n_chunks;
};

static void futex_wait(_Atomic unsigned *addr, unsigned val) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void futex_wake_all(_Atomic unsigned *addr) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void run_chunks(inf_pool *p, int tid) {
    int k;
    while ((k = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed)) < p->n_chunks)
        p->fn(p->arg, k, p->n_chunks, tid);
}

static void *worker_main(void *p_) {
    worker *w = p_;
    inf_pool *p = w->pool;
    unsigned seen = 0; /* the generation at creation: jobs may start before this thread runs */
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            atomic_fetch_add(&p->sleeping, 1);
            futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->sleeping, 1);
            spins = 0;
        }
        seen = g;
        if (atomic_load(&p->stop)) break;
        /* join job g unless it is already closed (or already replaced) */
        uint64_t s = atomic_load(&p->state);
        bool joined = false;
        while ((unsigned)(s >> 32) == g && !(s & CLOSED))
            if (atomic_compare_exchange_weak(&p->state, &s, s + 1)) {
                joined = true;
                break;
            }
        if (!joined) continue;
        run_chunks(p, w->tid);
        uint64_t left = atomic_fetch_sub(&p->state, 1) - 1;
        if ((left & CLOSED) && (left & ACTIVE_MASK) == 0) {
            atomic_fetch_add(&p->done, 1);
            if (atomic_load(&p->caller_waiting)) futex_wake_all(&p->done);
        }
    }
    return NULL;
}

inf_pool *inf_pool_create(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    inf_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    if (!p->workers) {
        free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        worker *w = &p->workers[i - 1];
        w->pool = p;
        w->tid = i;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            p->n = i; /* run with the threads we got */
            break;
        }
    }
    return p;
}

void inf_pool_free(inf_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    futex_wake_all(&p->gen);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->workers[i - 1].thread, NULL);
    free(p->workers);
    free(p);
}

int inf_pool_size(const inf_pool *p) {
    return p ? p->n : 1;
}

void inf_pool_run(inf_pool *p, inf_pool_fn fn, void *arg, int n_chunks) {
    if (!p || p->n == 1 || n_chunks <= 1) {
        for (int k = 0; k < n_chunks; k++)
            fn(arg, k, n_chunks, 0);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->n_chunks = n_chunks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    unsigned g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    atomic_store(&p->state, (uint64_t)g << 32); /* open, nobody active */
    atomic_store(&p->gen, g); /* seq_cst: publishes the job, ordered before the sleeper check */
    if (atomic_load(&p->sleeping) > 0) futex_wake_all(&p->gen);
    run_chunks(p, 0);
    /* No new joins from here; wait for the workers that joined: spin a
     * little, then sleep, so a busy machine can give this core to a worker
     * that was preempted in the middle of its chunk. */
    unsigned done0 = atomic_load(&p->done);
    uint64_t s = atomic_fetch_or(&p->state, CLOSED) | CLOSED;
    int spins = 0;
    while (s & ACTIVE_MASK) {
        if (++spins < SPIN_WAIT) {
            cpu_relax();
        } else {
            atomic_store(&p->caller_waiting, 1);
            s = atomic_load(&p->state);
            if (s & ACTIVE_MASK) futex_wait(&p->done, done0);
            atomic_store(&p->caller_waiting, 0);
            done0 = atomic_load(&p->done);
        }
        s = atomic_load_explicit(&p->state, memory_order_acquire);
    }
}

int inf_physical_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int count = 0;
    int seen_core[1024];
    int n_seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        char path[128];
        int core = -1, pkg = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", c);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &core) != 1) core = -1;
            fclose(f);
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
                 c);
        f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &pkg) != 1) pkg = 0;
            fclose(f);
        }
        if (core < 0) {
            count++;
            continue;
        }
        int key = pkg * 4096 + core, dup = 0;
        for (int i = 0; i < n_seen; i++)
            dup |= seen_core[i] == key;
        if (!dup && n_seen < 1024) seen_core[n_seen++] = key;
        if (!dup) count++;
    }
    return count > 0 ? count : 1;
}
