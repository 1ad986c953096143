#include "server/fields.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int srv_bad(srv_error *e, const char *param, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return srv_error_set(e, 400, "invalid_request_error", NULL, param, "'%s': %s", param, msg);
}

int srv_oom(srv_error *e) {
    return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
}

json_t *srv_field(json_t *o, const char *name) {
    json_t *v = json_object_get(o, name);
    return v && !json_is_null(v) ? v : NULL;
}

int srv_get_number(json_t *o, const char *name, const char *param, double lo, double hi, float *out,
                   srv_error *e) {
    json_t *v = srv_field(o, name);
    if (!param) param = name;
    if (!v) return 0;
    if (!json_is_number(v)) return srv_bad(e, param, "expected a number");
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) return srv_bad(e, param, "%g is out of range [%g, %g]", d, lo, hi);
    *out = (float)d;
    return 0;
}

int srv_get_int(json_t *o, const char *name, const char *param, long long lo, long long hi,
                long long *out, bool *present, srv_error *e) {
    json_t *v = srv_field(o, name);
    if (!param) param = name;
    if (present) *present = v != NULL;
    if (!v) return 0;
    if (!json_is_integer(v)) return srv_bad(e, param, "expected an integer");
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return srv_bad(e, param, "%lld is out of range [%lld, %lld]", x, lo, hi);
    *out = x;
    return 0;
}

int srv_get_bool(json_t *o, const char *name, const char *param, bool *out, srv_error *e) {
    json_t *v = srv_field(o, name);
    if (!param) param = name;
    if (!v) return 0;
    if (!json_is_boolean(v)) return srv_bad(e, param, "expected true or false");
    *out = json_is_true(v);
    return 0;
}

int srv_get_string(json_t *o, const char *name, const char *param, const char **out, srv_error *e) {
    json_t *v = srv_field(o, name);
    if (!param) param = name;
    if (!v) return 0;
    if (!json_is_string(v)) return srv_bad(e, param, "expected a string");
    *out = json_string_value(v);
    return 0;
}

json_t *srv_parse_object(const char *body, size_t len, srv_error *e) {
    size_t nv = srv_json_values(body, len);
    if (nv > SRV_MAX_JSON_VALUES)
        return srv_error_set(e, 413, "invalid_request_error", "request_too_large", NULL,
                             "the request body holds about %zu JSON values, more than the limit "
                             "of %d",
                             nv, SRV_MAX_JSON_VALUES),
               NULL;
    json_error_t je;
    json_t *root = srv_json_parse_body(body, len, &je);
    if (!root)
        return srv_error_set(e, 400, "invalid_request_error", NULL, NULL,
                             "malformed JSON in the request body: %s (line %d, column %d)", je.text,
                             je.line, je.column),
               NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        return srv_error_set(e, 400, "invalid_request_error", NULL, NULL,
                             "the request body must be a JSON object"),
               NULL;
    }
    return root;
}
