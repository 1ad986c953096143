/* A persistent thread pool: n-1 worker threads plus the caller.
 *
 * inf_pool_run(p, fn, arg, n_chunks) runs fn(arg, chunk, n_chunks, tid) once
 * for every chunk 0..n_chunks-1 and returns when all are done. Chunks are
 * claimed dynamically by whichever threads are running (the caller too), so
 * a worker the OS has not scheduled yet never holds a job up: the caller
 * only waits for workers that joined the job. tid (0 = caller) names the
 * thread, for thread-private scratch. Workers spin briefly after each job,
 * then sleep on a futex. Ops define chunks as disjoint slices of their output
 * that do not depend on the thread count, so results do not either. One
 * caller at a time. */
#ifndef INF_BACKEND_POOL_H
#define INF_BACKEND_POOL_H

typedef struct inf_pool inf_pool;
typedef void (*inf_pool_fn)(void *arg, int chunk, int n_chunks, int tid);

/* A pool of n_threads (>= 1; 1 means no workers). NULL on failure. */
inf_pool *inf_pool_create(int n_threads);
void inf_pool_free(inf_pool *p);
int inf_pool_size(const inf_pool *p);
void inf_pool_run(inf_pool *p, inf_pool_fn fn, void *arg, int n_chunks);

/* Physical cores this process may run on (affinity mask, SMT siblings counted once); >= 1. */
int inf_physical_cores(void);

#endif
