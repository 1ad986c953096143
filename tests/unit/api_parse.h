/* For the API parser tests: parse a body with an srv_api, and expect a 400
 * that names the offending field. */
#ifndef INF_TEST_API_PARSE_H
#define INF_TEST_API_PARSE_H

#include <string.h>

#include "harness.h"
#include "server/api.h"

static int parse(const srv_api *api, srv_request *r, const char *body, srv_error *e) {
    memset(e, 0, sizeof *e);
    return api->parse(r, body, strlen(body), NULL, e);
}

/* Expects a 400 whose param is `param` (when not NULL) and whose message
 * names it. */
static void bad(const srv_api *api, const char *body, const char *param) {
    srv_request r;
    srv_error e;
    int rc = parse(api, &r, body, &e);
    CHECK_MSG(rc == -1, "accepted: %s", body);
    if (rc == 0) {
        srv_request_free(&r);
        return;
    }
    CHECK_MSG(e.status == 400, "%s: status %d (%s)", body, e.status, e.msg);
    if (param)
        CHECK_MSG(!strcmp(e.param, param), "%s: param '%s', expected '%s' (%s)", body, e.param,
                  param, e.msg);
    CHECK_MSG(strstr(e.msg, param ? param : "") != NULL, "%s: message '%s' does not name '%s'",
              body, e.msg, param ? param : "");
}

#endif
