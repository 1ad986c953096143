#include "server/metrics.h"

#include "runtime/text.h"

static void metric(inf_buf *b, const char *type, const char *name, const char *help, double v) {
    inf_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

char *srv_metrics_text(const inf_sched_metrics *m, const srv_http_counts *h, long n_ctx_total) {
    inf_buf b = {0};
    metric(&b, "counter", "llamacpp:prompt_tokens_total", "Number of prompt tokens processed.",
           (double)m->prompt_tokens_total);
    metric(&b, "counter", "llamacpp:prompt_seconds_total", "Prompt process time",
           m->prompt_seconds_total);
    metric(&b, "counter", "llamacpp:tokens_predicted_total",
           "Number of generation tokens processed.", (double)m->tokens_predicted_total);
    metric(&b, "counter", "llamacpp:tokens_predicted_seconds_total", "Predict process time",
           m->tokens_predicted_seconds_total);
    metric(&b, "counter", "llamacpp:n_decode_total", "Total number of forward calls.",
           (double)m->n_decode_total);
    metric(&b, "counter", "llamacpp:n_busy_slots_per_decode",
           "Average number of busy slots per forward call.",
           m->n_decode_total ? (double)m->n_busy_slots_total / (double)m->n_decode_total : 0);
    metric(&b, "gauge", "llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s.",
           m->prompt_seconds_total > 0 ? (double)m->prompt_tokens_total / m->prompt_seconds_total
                                       : 0);
    metric(&b, "gauge", "llamacpp:predicted_tokens_seconds",
           "Average generation throughput in tokens/s.",
           m->tokens_predicted_seconds_total > 0
               ? (double)m->tokens_predicted_total / m->tokens_predicted_seconds_total
               : 0);
    metric(&b, "gauge", "llamacpp:kv_cache_usage_ratio",
           "KV-cache usage. 1 means 100 percent usage.",
           n_ctx_total > 0 ? (double)m->kv_tokens / (double)n_ctx_total : 0);
    metric(&b, "gauge", "llamacpp:kv_cache_tokens", "KV-cache tokens.", (double)m->kv_tokens);
    metric(&b, "gauge", "llamacpp:requests_processing", "Number of requests processing.",
           (double)m->requests_processing);
    metric(&b, "gauge", "llamacpp:requests_deferred", "Number of requests deferred.",
           (double)m->requests_deferred);
    metric(&b, "gauge", "llamacpp:n_tokens_max", "Largest observed n_tokens.",
           (double)m->n_tokens_max);
    metric(&b, "counter", "inferno:prompt_tokens_cached_total",
           "Prompt tokens served from a slot's KV cache.", (double)m->cache_tokens_reused);
    metric(&b, "counter", "inferno:requests_finished_total", "Generations that ran to the end.",
           (double)m->requests_finished_total);
    metric(&b, "counter", "inferno:requests_cancelled_total",
           "Generations abandoned by their client.", (double)m->requests_cancelled_total);
    metric(&b, "counter", "inferno:spec_steps_total",
           "Speculative decoding steps (forward calls that verified drafts).",
           (double)m->spec_steps_total);
    metric(&b, "counter", "inferno:spec_draft_tokens_total", "Tokens drafted for verification.",
           (double)m->spec_drafted_total);
    metric(&b, "counter", "inferno:spec_accepted_tokens_total",
           "Drafted tokens taken as the output.", (double)m->spec_accepted_total);
    metric(&b, "gauge", "inferno:spec_acceptance_rate",
           "Share of the drafted tokens taken (0 when none were drafted).",
           m->spec_drafted_total ? (double)m->spec_accepted_total / (double)m->spec_drafted_total
                                 : 0);
    if (m->has_kv_stats) {
        const inf_kv_stats *k = &m->kv;
        metric(&b, "gauge", "inferno:kv_block_size", "Positions per KV block.",
               (double)k->block_size);
        metric(&b, "gauge", "inferno:kv_blocks_used", "KV blocks referenced.",
               (double)(k->blocks_total - k->blocks_free));
        metric(&b, "gauge", "inferno:kv_blocks_free", "KV blocks free.", (double)k->blocks_free);
        metric(&b, "gauge", "inferno:kv_pool_bytes", "Bytes of the KV block pool.",
               k->block_bytes * (double)k->blocks_total);
        metric(&b, "gauge", "inferno:kv_pool_bytes_used", "Bytes of KV blocks referenced.",
               k->block_bytes * (double)(k->blocks_total - k->blocks_free));
        metric(&b, "gauge", "inferno:kv_pool_usage_ratio",
               "Share of the KV block pool referenced (1 = full).",
               k->blocks_total
                   ? (double)(k->blocks_total - k->blocks_free) / (double)k->blocks_total
                   : 0);
        metric(&b, "counter", "inferno:prefix_cache_lookups_total", "Prefix cache lookups.",
               (double)k->prefix_lookups);
        metric(&b, "counter", "inferno:prefix_cache_hits_total",
               "Prefix cache lookups that reused at least one token.", (double)k->prefix_hits);
        metric(&b, "counter", "inferno:prefix_cache_tokens_reused_total",
               "Prompt tokens served from the prefix cache.", (double)k->prefix_tokens_reused);
        metric(&b, "gauge", "inferno:prefix_cache_nodes", "Radix tree nodes.",
               (double)k->tree_nodes);
        metric(&b, "gauge", "inferno:prefix_cache_tokens", "Tokens held by the radix tree.",
               (double)k->tree_tokens);
        metric(&b, "counter", "inferno:prefix_cache_evictions_total", "Radix tree nodes evicted.",
               (double)k->evictions);
        if (k->state_bytes > 0) { /* a model with recurrent layers (Qwen3.5) */
            metric(&b, "gauge", "inferno:prefix_cache_states",
                   "Recurrent-state checkpoints the prefix cache holds.", (double)k->states);
            metric(&b, "gauge", "inferno:prefix_cache_states_bytes",
                   "Bytes of those checkpoints (outside the KV block pool).",
                   k->state_bytes * (double)k->states);
            metric(&b, "counter", "inferno:prefix_cache_states_dropped_total",
                   "Checkpoints let go of to make room for newer ones.", (double)k->states_dropped);
        }
        metric(&b, "gauge", "inferno:kv_refcount_errors",
               "KV block references not held by a sequence or the prefix cache (must be 0).",
               (double)k->ref_errors);
    }
    metric(&b, "counter", "inferno:http_requests_total", "HTTP requests answered.",
           (double)h->requests_total);
    metric(&b, "counter", "inferno:http_errors_total", "HTTP requests answered with an error.",
           (double)h->errors_total);
    return b.data;
}
