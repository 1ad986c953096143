/* Validation of request fields, shared by the API parsers (api_responses.c,
 * api_messages.c): each reads one field of a JSON object with its type and
 * range and, when it is wrong, fills a 400 naming the field by its path
 * ("tools[2].name", "text.format.schema") and returns -1. A field that is
 * absent or null keeps the caller's default. */
#ifndef INF_SERVER_FIELDS_H
#define INF_SERVER_FIELDS_H

#include <jansson.h>
#include <stdbool.h>

#include "server/oai.h"

/* A 400 invalid_request_error whose param is `param` and whose message starts
 * with it: "'param': ...". Returns -1. */
int srv_bad(srv_error *e, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A 500 "out of memory". Returns -1. */
int srv_oom(srv_error *e);

/* The member `name` of o when it is present and not null, else NULL. */
json_t *srv_field(json_t *o, const char *name);

/* Typed members: 0 when absent/null (out untouched) or valid, -1 with e set.
 * `param` names the field in errors (NULL: name). */
int srv_get_number(json_t *o, const char *name, const char *param, double lo, double hi, float *out,
                   srv_error *e);
int srv_get_int(json_t *o, const char *name, const char *param, long long lo, long long hi,
                long long *out, bool *present, srv_error *e);
int srv_get_bool(json_t *o, const char *name, const char *param, bool *out, srv_error *e);
/* A string member; *out borrowed from o. */
int srv_get_string(json_t *o, const char *name, const char *param, const char **out, srv_error *e);

/* Parses a request body into an object, with the bounds every API shares
 * (at most SRV_MAX_JSON_VALUES values, no NUL byte, an object at the top).
 * NULL with a 400/413 in e. */
json_t *srv_parse_object(const char *body, size_t len, srv_error *e);

#endif
