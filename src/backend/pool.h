/* A persistent thread pool: n-1 worker threads plus the caller.
 *
 * inf_pool_run(p, fn, arg) runs fn(arg, ith, nth) for ith = 0..nth-1 (the
 * caller takes ith = 0) and returns when all are done. Workers spin briefly
 * after each job, then sleep on a futex until the next one. Ops split their
 * output into disjoint slices by (ith, nth), so results do not depend on the
 * number of threads. One caller at a time. */
#ifndef INF_BACKEND_POOL_H
#define INF_BACKEND_POOL_H

typedef struct inf_pool inf_pool;
typedef void (*inf_pool_fn)(void *arg, int ith, int nth);

/* A pool of n_threads (>= 1; 1 means no workers). NULL on failure. */
inf_pool *inf_pool_create(int n_threads);
void inf_pool_free(inf_pool *p);
int inf_pool_size(const inf_pool *p);
void inf_pool_run(inf_pool *p, inf_pool_fn fn, void *arg);

/* Physical cores this process may run on (affinity mask, SMT siblings counted once); >= 1. */
int inf_physical_cores(void);

#endif
