/* Unit tests of the chat-template interpreter: each construct, the error
 * messages (with line:column), and the limits that stop hostile templates.
 * Byte-exactness against Jinja2 is checked by tests/oracle/check_template.sh. */
#include <stdlib.h>
#include <string.h>

#include "template/template.h"
#include "harness.h"

/* Renders src with the JSON context ctx_json; returns the malloc'd output or
 * NULL (then err holds the message). */
static char *render_lim(const char *src, const char *ctx_json, const inf_tmpl_limits *lim,
                        inf_err *err) {
    json_error_t je;
    json_t *ctx = ctx_json ? json_loads(ctx_json, 0, &je) : NULL;
    if (ctx_json && !ctx) {
        fprintf(stderr, "bad test JSON: %s\n", je.text);
        return NULL;
    }
    char *out = NULL;
    size_t len = 0;
    int rc = inf_tmpl_render(&out, &len, src, ctx, lim, err);
    json_decref(ctx);
    if (rc) return NULL;
    if (strlen(out) != len) fprintf(stderr, "length mismatch for %s\n", src);
    return out;
}

static char *render(const char *src, const char *ctx_json, inf_err *err) {
    return render_lim(src, ctx_json, NULL, err);
}

#define EXPECT(src, ctx, want)                                                                     \
    do {                                                                                           \
        inf_err e_ = {{0}};                                                                        \
        char *got_ = render(src, ctx, &e_);                                                        \
        CHECK_MSG(got_ && !strcmp(got_, want), "%s\n    want \"%s\"\n    got  \"%s\" %s", src,     \
                  want, got_ ? got_ : "(error)", got_ ? "" : e_.msg);                              \
        free(got_);                                                                                \
    } while (0)

/* Expects failure with a message containing `part`. */
#define EXPECT_ERR_LIM(src, ctx, lim, part)                                                        \
    do {                                                                                           \
        inf_err e_ = {{0}};                                                                        \
        char *got_ = render_lim(src, ctx, lim, &e_);                                               \
        CHECK_MSG(!got_ && strstr(e_.msg, part),                                                   \
                  "%s\n    want error containing \"%s\"\n    got %s%s", src, part,                 \
                  got_ ? "output: " : "error: ", got_ ? got_ : e_.msg);                            \
        free(got_);                                                                                \
    } while (0)
#define EXPECT_ERR(src, ctx, part) EXPECT_ERR_LIM(src, ctx, NULL, part)

static void test_text_and_output(void) {
    EXPECT("", NULL, "");
    EXPECT("plain text", NULL, "plain text");
    EXPECT("a\n", NULL, "a"); /* one trailing newline dropped */
    EXPECT("a\n\n", NULL, "a\n");
    EXPECT("{{ 'x' }}{{ 1 }}{{ 1.5 }}{{ none }}{{ true }}", NULL, "x11.5NoneTrue");
    EXPECT("{{ undefined_name }}|", NULL, "|");
    EXPECT("{# comment #}x", NULL, "x");
    EXPECT("{% raw %}{{ x }}{% endraw %}", NULL, "{{ x }}");
    EXPECT("a\r\nb", NULL, "a\nb");
    EXPECT("{{ [1, 'a', none] }} {{ {'k': true} }} {{ (1,) }}", NULL,
           "[1, 'a', None] {'k': True} (1,)");
    EXPECT("{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 2.0 }} {{ 1e-5 }}", NULL,
           "0.30000000000000004 1e+20 2.0 1e-05");
}

static void test_whitespace(void) {
    EXPECT("a\n{% if true %}\nb\n{% endif %}\nc", NULL, "a\nb\nc");         /* trim_blocks */
    EXPECT("a\n    {% if true %}\nb\n    {% endif %}\nc", NULL, "a\nb\nc"); /* lstrip_blocks */
    EXPECT("a  {{- 'b' -}}  c", NULL, "abc");
    EXPECT("a  {%- if true -%}  b  {%- endif -%}  c", NULL, "abc");
    EXPECT("  {{ 'x' }}", NULL, "  x"); /* no lstrip for {{ */
    EXPECT("  {%+ if true %}x{% endif %}", NULL, "  x");
    EXPECT("{% if true +%}\nx{% endif %}", NULL, "\nx");
    EXPECT("a {# c #}\nb", NULL, "a b");
}

static void test_control(void) {
    EXPECT("{% if x %}a{% elif y %}b{% else %}c{% endif %}", "{\"x\": 0, \"y\": 1}", "b");
    EXPECT("{% if x %}a{% elif y %}b{% else %}c{% endif %}", "{\"x\": 0, \"y\": 0}", "c");
    EXPECT("{% for i in [1,2,3] %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last "
           "}}{{ loop.length }},{% endfor %}",
           NULL, "01TrueFalse3,12FalseFalse3,23FalseTrue3,");
    EXPECT("{% for i in [1,2,3] %}{{ loop.revindex }}{{ loop.revindex0 }}{% endfor %}", NULL,
           "322110");
    EXPECT("{% for i in [] %}x{% else %}empty{% endfor %}", NULL, "empty");
    EXPECT("{% for i in [1,2,3,4] if i is even %}{{ i }}/{{ loop.length }} {% endfor %}", NULL,
           "2/2 4/2 ");
    EXPECT("{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}", "{\"d\": {\"b\": 1, \"a\": 2}}",
           "b1a2");
    EXPECT("{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break "
           "%}{% endif %}{{ i }}{% endfor %}",
           NULL, "023");
    EXPECT("{% set x = 1 %}{% for i in [1] %}{% set x = 5 %}{% endfor %}{{ x }}", NULL,
           "1"); /* loop scope */
    EXPECT("{% set ns = namespace(v=1) %}{% for i in [1,2] %}{% set ns.v = ns.v * 10 %}{% endfor "
           "%}{{ ns.v }}",
           NULL, "100");
    EXPECT("{% set a, b = 'xy' %}{{ b }}{{ a }}", NULL, "yx");
    EXPECT("{% set t %}[{{ 1 }}]{% endset %}{{ t }}{{ t }}", NULL, "[1][1]");
    EXPECT("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(2, 3) }}{{ m(b=4, "
           "a=5) }}",
           NULL, "1B2354");
    EXPECT("{% filter upper %}ab{% endfilter %}", NULL, "AB");
    EXPECT("{% generation %}kept{% endgeneration %}", NULL, "kept");
}

static void test_expressions(void) {
    EXPECT("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} "
           "{{ 2 ** 8 }}",
           NULL, "7 9 3 -4 2 3.5 256");
    EXPECT("{{ 'a' ~ 1 ~ none }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'ab' * 2 }}", NULL,
           "a1None ab [1, 2] abab");
    EXPECT("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 2 <= 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }}", NULL,
           "True False True True True");
    EXPECT("{{ 'a' in 'cat' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 0} }}", NULL,
           "True False True");
    EXPECT("{{ true and 'x' }} {{ 0 or 'y' }} {{ not 0 }} {{ 'a' if false else 'b' }} {{ 'a' if "
           "false }}|",
           NULL, "x y True b |");
    EXPECT("{{ xs[0] }}{{ xs[-1] }}{{ xs[1:] }}{{ xs[::-1] }}{{ xs[:-1] }}{{ xs[9] }}",
           "{\"xs\": [1, 2, 3]}", "13[2, 3][3, 2, 1][1, 2]");
    EXPECT("{{ s[::-1] }} {{ s[1] }} {{ s|length }}", "{\"s\": \"h\\u00e9\\ud83d\\ude00\"}",
           "\xf0\x9f\x98\x80\xc3\xa9h \xc3\xa9 3");
    EXPECT("{{ m.role }} {{ m['content'] }} {{ m.nope }}|",
           "{\"m\": {\"role\": \"user\", \"content\": \"hi\"}}", "user hi |");
    EXPECT("{{ {'a': 1, 'b': [2]}.b[0] }}", NULL, "2");
    EXPECT("{{ '\\n'|length }} {{ 'it\\'s' }} {{ 'a' 'b' }} {{ '\\u00e9' }}", NULL,
           "1 it's ab \xc3\xa9");
    EXPECT("{{ -x }} {{ +x }} {{ x|abs }}", "{\"x\": -3}", "3 -3 3");
}

static void test_filters_methods_tests(void) {
    EXPECT("{{ xs|length }} {{ xs|first }} {{ xs|last }} {{ xs|join('-') }} {{ xs|reverse|join }}",
           "{\"xs\": [\"a\", \"b\"]}", "2 a b a-b ba");
    EXPECT("{{ ' x '|trim }}|{{ 'aB'|upper }}{{ 'aB'|lower }} {{ 'hello world'|capitalize }} {{ "
           "'hello world'|title }}",
           NULL, "x|ABab Hello world Hello World");
    EXPECT("{{ x|default('d') }} {{ ''|default('d', true) }} {{ 5|string }} {{ '12'|int + 1 }} {{ "
           "'x'|int }} {{ 2.7|int }}",
           NULL, "d d 5 13 0 2");
    EXPECT("{{ d|items|list }}", "{\"d\": {\"a\": 1}}", "[('a', 1)]");
    EXPECT("{{ d|tojson }}", "{\"d\": {\"a\": [1, 2.5, null, true], \"s\": \"\\u00e9\\\"<>\\n\"}}",
           "{\"a\": [1, 2.5, null, true], \"s\": \"\xc3\xa9\\\"<>\\n\"}");
    EXPECT("{{ d|tojson(indent=2) }}", "{\"d\": {\"a\": [1], \"b\": {}}}",
           "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
    EXPECT("{{ 'a,b'.split(',') }} {{ ' a b '.split() }} {{ 'xxaxx'.strip('x') }} {{ '  "
           "a'.lstrip() }} {{ 'a  '.rstrip() }}|",
           NULL, "['a', 'b'] ['a', 'b'] a a a|");
    EXPECT("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ 'a-b'.replace('-', '+') }} "
           "{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}",
           NULL, "True True a+b ABab");
    EXPECT("{{ d.get('a') }} {{ d.get('z', 0) }} {{ d.keys()|list }} {{ d.values()|list }} {{ "
           "d.items()|list }}",
           "{\"d\": {\"a\": 1}}", "1 0 ['a'] [1] [('a', 1)]");
    EXPECT("{{ x is defined }} {{ y is undefined }} {{ n is none }} {{ 's' is string }} {{ 1 is "
           "number }} {{ d is mapping }} {{ d is iterable }}",
           "{\"x\": 1, \"n\": null, \"d\": {}}", "True True True True True True True");
    EXPECT("{{ true is true }} {{ 1 is true }} {{ false is false }} {{ true is boolean }} {{ 1 is "
           "integer }} {{ [] is sequence }} {{ 1 is not none }}",
           NULL, "True False True True True True True");
    EXPECT("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|join }}",
           "{\"ms\": [{\"role\": \"user\", \"c\": \"1\"}, {\"role\": \"x\", \"c\": \"2\"}]}", "1");
    EXPECT("{{ [3, 1, 2]|sort|list }} {{ 2.5|round }} {{ 3.5|round }}", NULL, "[1, 2, 3] 2.0 4.0");
}

static void test_undefined_semantics(void) {
    EXPECT("{{ u }}|{{ u|length }}|{% for x in u %}x{% endfor %}|{{ u ~ 'a' }}|{{ 'a' in u }}|{{ "
           "not u }}",
           NULL, "|0||a|False|True");
    EXPECT_ERR("{{ u.attr }}", NULL, "'u' is undefined");
    EXPECT_ERR("{{ u + 1 }}", NULL, "'u' is undefined");
    EXPECT_ERR("{{ d.a.b }}", "{\"d\": {}}", "'dict object' has no attribute 'a'");
}

static void test_errors(void) {
    EXPECT_ERR("{% if true %}never closed", NULL, "template:1:4: unexpected end of template");
    EXPECT_ERR("line1\n  {{ x | nosuch }}", NULL, "template:2:8: no filter named 'nosuch'");
    EXPECT_ERR("{{ x is nosuch }}", NULL, "no test named 'nosuch'");
    EXPECT_ERR("{{ 'abc }}", NULL, "template:1:4: unterminated string literal");
    EXPECT_ERR("{{ x ", NULL, "tag never closed");
    EXPECT_ERR("{# comment", NULL, "unterminated comment");
    EXPECT_ERR("{% raw %}x", NULL, "endraw");
    EXPECT_ERR("{% endif %}", NULL, "template:1:4: unexpected 'endif' tag");
    EXPECT_ERR("{% include 'x' %}", NULL, "unsupported tag 'include'");
    EXPECT_ERR("{{ (1 }}", NULL, "template:1:");
    EXPECT_ERR("{{ 1 ) }}", NULL, "unexpected ')'");
    EXPECT_ERR("a\nb\n   {{ raise_exception('Roles must alternate') }}", NULL,
               "template:3:7: Roles must alternate");
    EXPECT_ERR("{{ 1 / 0 }}", NULL, "division by zero");
    EXPECT_ERR("{{ 'a' < 1 }}", NULL, "not supported between");
    EXPECT_ERR("{{ [].append(1) }}", NULL, "unsafe");
    EXPECT_ERR("{{ 9223372036854775807 + 1 }}", NULL, "integer overflow");
    EXPECT_ERR("{{ x }}\xff", NULL, "invalid UTF-8");
    EXPECT_ERR("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL, "takes not more than 1");
    EXPECT_ERR("{% set x.y = 1 %}", "{\"x\": {}}", "non-namespace");
    EXPECT_ERR("{% for a, b in [[1]] %}{% endfor %}", NULL, "not enough values to unpack");
    EXPECT_ERR("{{ u|tojson }}", NULL, "not JSON serializable");
}

static void test_limits(void) {
    inf_tmpl_limits lim = inf_tmpl_default_limits();
    CHECK_INT(lim.max_iterations, 1000000);
    CHECK_INT(lim.max_depth, 64);
    CHECK_INT(lim.max_output, 16 << 20);
    EXPECT_ERR("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
               NULL, "loop iteration limit");
    EXPECT_ERR("{{ range(100000000)|length }}", NULL, "exceeds the iteration limit");
    EXPECT_ERR("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL,
               "macro calls nested deeper than 64");
    EXPECT_ERR("{% set s = 'x' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}", NULL,
               "longer than the limit");
    EXPECT_ERR("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s "
               "%}{% endfor %}",
               NULL, "longer than the limit");
    EXPECT_ERR("{{ 'x' * 100000000000 }}", NULL, "longer than the limit");
    /* quadratic list growth: stopped by the memory budget or the step budget */
    {
        inf_err e = {{0}};
        char *got = render("{% set ns = namespace(l=[]) %}{% for i in range(200000) %}{% set ns.l "
                           "= ns.l + [i] %}{% endfor %}{{ ns.l|length }}",
                           NULL, &e);
        CHECK_MSG(!got && (strstr(e.msg, "memory limit") || strstr(e.msg, "step limit")), "got %s",
                  got ? got : e.msg);
        free(got);
    }
    /* scanning a large string many times: stopped by the step budget */
    EXPECT_ERR("{% set s = 'x' * 10000000 %}{% for i in range(1000000) %}{% if 'y' in s %}{% endif "
               "%}{% endfor %}",
               NULL, "step limit");
    /* deep syntax nesting */
    {
        size_t n = 5000;
        char *src = malloc(2 * n + 16);
        strcpy(src, "{{ ");
        for (size_t i = 0; i < n; i++)
            strcat(src, "(");
        strcat(src, "1");
        for (size_t i = 0; i < n; i++)
            strcat(src, ")");
        strcat(src, " }}");
        EXPECT_ERR(src, NULL, "nested too deeply");
        free(src);
        src = malloc(20 * n + 16);
        src[0] = 0;
        for (size_t i = 0; i < n; i++)
            strcat(src, "{% if 1 %}");
        EXPECT_ERR(src, NULL, "nested too deeply");
        free(src);
    }
    /* issue 20 row 1: chains parsed by a loop but evaluated by recursion (a
       filter, attribute, ~, + or call chain of 50,000 links) are refused at
       parse time instead of overflowing the C stack */
    {
        static const char *const links[] = {"|e", ".x", " ~ 'a'", " + 1", "[0]", "()"};
        for (size_t k = 0; k < sizeof links / sizeof *links; k++) {
            size_t n = 50000, l = strlen(links[k]);
            char *src = malloc(l * n + 32);
            strcpy(src, "{{ x");
            char *p = src + strlen(src);
            for (size_t i = 0; i < n; i++, p += l)
                memcpy(p, links[k], l);
            strcpy(p, " }}");
            EXPECT_ERR(src, "{\"x\": \"a\"}", "nested more than 1024 levels");
            free(src);
        }
        /* 1,000 links still work */
        char *src = malloc(4 * 1000 + 32);
        strcpy(src, "{{ x");
        for (int i = 0; i < 1000; i++)
            strcat(src, "|e");
        strcat(src, " }}");
        EXPECT(src, "{\"x\": \"a\"}", "a");
        free(src);
    }
    /* ... and a render that nests macro calls on deep expressions stops at the
       evaluation depth budget, a clear error */
    {
        char *src = malloc(16 * 1000 + 128);
        strcpy(src, "{% macro f(n) %}{{ f(n + 1)");
        for (int i = 0; i < 1000; i++)
            strcat(src, "|e");
        strcat(src, " }}{% endmacro %}{{ f(0) }}");
        EXPECT_ERR(src, NULL, "evaluation nested deeper than 2048 levels");
        free(src);
    }
    /* row 2: every builtin is charged by the work it does (these took 40-60
       minutes when unique and == were uncharged) */
    EXPECT_ERR("{{ range(1000000)|list|unique|list|length }}", NULL, "step limit");
    EXPECT_ERR("{{ range(100000)|map('string')|unique|list|length }}", NULL, "step limit");
    EXPECT_ERR("{% set s = 'x' * 10000000 %}{% set t = 'x' * 10000000 %}{% for i in "
               "range(1000000) %}{% if s == t %}{% endif %}{% endfor %}",
               NULL, "step limit");
    EXPECT_ERR("{% set l = range(100000)|list %}{% set m = range(100000)|list %}{% for i in "
               "range(100000) %}{% if l == m %}{% endif %}{% endfor %}",
               NULL, "step limit");
    EXPECT_ERR("{% set l = range(100000)|list %}{% for i in range(100000) %}{% if l is eq(l) %}{% "
               "endif %}{% endfor %}",
               NULL, "step limit");
    /* values shared 2^60 times over compare within the step budget */
    EXPECT_ERR("{% set ns = namespace(x=[1]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] "
               "%}{% endfor %}{{ ns.x == ns.x + [] }}",
               NULL, "step limit");
    EXPECT("{{ [3, 1, 2, 1, 'a', 'A']|unique|list }}", NULL, "[3, 1, 2, 'a']");
    EXPECT("{{ ['b', 'A', 'a', 'C']|sort }}", NULL, "['A', 'a', 'b', 'C']");
    EXPECT("{{ {'b': 1, 'a': 2, 'c': 3}|tojson(sort_keys=true) }}", NULL,
           "{\"a\": 2, \"b\": 1, \"c\": 3}");
    /* row 15: tojson deeper than its limit says so */
    {
        EXPECT_ERR("{% set ns = namespace(x=[]) %}{% for i in range(600) %}{% set ns.x = [ns.x] "
                   "%}{% endfor %}{{ ns.x|tojson }}",
                   NULL, "tojson: value nested deeper than 512 levels");
        size_t n = 300;
        char *ctx; /* tool parameters nested 300 deep still serialize */
        char *want = malloc(2 * n + 32);
        ctx = malloc(2 * n + 32);
        strcpy(ctx, "{\"x\": ");
        want[0] = 0;
        for (size_t i = 0; i < n; i++)
            strcat(ctx, "["), strcat(want, "[");
        for (size_t i = 0; i < n; i++)
            strcat(ctx, "]"), strcat(want, "]");
        strcat(ctx, "}");
        EXPECT("{{ x|tojson }}", ctx, want);
        free(ctx);
        free(want);
    }
    /* a namespace that contains itself cannot be printed forever */
    EXPECT_ERR("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", NULL, "nested too deeply");
    /* tighter limits from the caller */
    inf_tmpl_limits small = lim;
    small.max_iterations = 10;
    small.max_output = 8;
    EXPECT_ERR_LIM("{% for i in range(11) %}{% endfor %}", NULL, &small,
                   "exceeds the iteration limit");
    EXPECT_ERR_LIM("{% for i in range(5) %}{% for j in range(5) %}{% endfor %}{% endfor %}", NULL,
                   &small, "loop iteration limit");
    EXPECT_ERR_LIM("123456789", NULL, &small, "longer than the limit");
    {
        inf_err e = {{0}};
        char *ok = render_lim("12345678", NULL, &small, &e);
        CHECK_STR(ok, "12345678");
        free(ok);
    }
}

static void test_api(void) {
    /* a parsed template renders many times with different contexts */
    inf_tmpl *t;
    inf_err err = {{0}};
    CHECK_INT(inf_tmpl_parse(&t, "{{ who }}!", NULL, &err), 0);
    for (int i = 0; i < 3; i++) {
        json_t *ctx = json_pack("{s:i}", "who", i);
        char *out;
        size_t len;
        CHECK_INT(inf_tmpl_exec(t, &out, &len, ctx, &err), 0);
        char want[8];
        snprintf(want, sizeof want, "%d!", i);
        CHECK_STR(out, want);
        CHECK_INT(len, strlen(want));
        free(out);
        json_decref(ctx);
    }
    inf_tmpl_free(t);
    inf_tmpl_free(NULL);

    /* inf_chat_render: tools absent means None (as in transformers); extra kwargs win */
    const char *src = "{{ tools is none }} {{ add_generation_prompt }} {{ enable_thinking }} {{ "
                      "messages[0].content }}";
    json_t *msgs = json_loads("[{\"role\": \"user\", \"content\": \"hi\"}]", 0, NULL);
    json_t *kw = json_loads("{\"enable_thinking\": false}", 0, NULL);
    char *out = NULL;
    CHECK_INT(inf_chat_render(&out, src, msgs, NULL, true, kw, &err), 0);
    CHECK_STR(out, "True True False hi");
    free(out);
    json_t *tools = json_loads("[]", 0, NULL);
    CHECK_INT(inf_chat_render(&out, src, msgs, tools, false, NULL, &err), 0);
    CHECK_STR(out, "False False  hi");
    free(out);
    CHECK_INT(inf_chat_render(&out, src, kw, NULL, false, NULL, &err),
              -1); /* messages not an array */
    CHECK(strstr(err.msg, "messages") != NULL);
    CHECK(out == NULL);
    json_decref(tools);
    json_decref(kw);
    json_decref(msgs);

    /* strftime_now: the current date in the given format */
    CHECK_INT(inf_tmpl_render(&out, NULL, "{{ strftime_now('%Y-%m') }}", NULL, NULL, &err), 0);
    CHECK(out && strlen(out) == 7 && out[4] == '-');
    free(out);

    /* a runtime error leaves *out NULL */
    out = (char *)1;
    CHECK_INT(inf_tmpl_render(&out, NULL, "{{ raise_exception('no') }}", NULL, NULL, &err), -1);
    CHECK(out == NULL);
}

int main(void) {
    test_text_and_output();
    test_whitespace();
    test_control();
    test_expressions();
    test_filters_methods_tests();
    test_undefined_semantics();
    test_errors();
    test_limits();
    test_api();
    return th_report();
}
