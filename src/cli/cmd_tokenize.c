/* inferno tokenize: text -> token ids (and back with --decode). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
#include "model/model.h"
#include "modelfile/model.h"
#include "tokenizer/tokenizer.h"
#include "util/mem.h"

static void usage(FILE *f) {
    fprintf(f, "usage: inferno tokenize [-m MODEL] [options] [TEXT...]\n"
               "\n"
               "Prints the token ids of TEXT (the arguments joined by spaces), or of\n"
               "standard input when no TEXT is given.\n"
               "\n"
               "  -m MODEL            GGUF file, Hugging Face folder, or a tokenizer.json\n"
               "                      (default " INF_DEFAULT_MODEL ")\n"
               "  --pieces            one token per line: id, then its bytes (escaped)\n"
               "  --pretokens         the pieces BPE merges instead of ids, one per line\n"
               "                      (escaped): the added tokens cut out, the text between\n"
               "                      normalized and split by the pre-tokenizer; with\n"
               "                      --jsonl a JSON array of strings per line\n"
               "  --no-parse-special  control tokens such as <|im_start|> in the text are\n"
               "                      plain text (user-defined ones such as <think> still match)\n"
               "  --jsonl             each input line is a JSON string; each output line is\n"
               "                      a JSON array of ids (null, and a message on stderr,\n"
               "                      for a line that fails)\n"
               "  --decode            the reverse: input is ids (arguments, or whitespace\n"
               "                      separated on stdin; with --jsonl one JSON array per\n"
               "                      line -> one JSON string per line)\n"
               "  --bench             encode the input repeatedly for about 2 s of CPU time\n"
               "                      and print the throughput in MB/s (one thread)\n");
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A tokenizer.json, or a folder holding one, needs no weights: read only the
 * tokenizer files. A GGUF file goes through the model reader. */
static int open_tokenizer(inf_tokenizer **tok, const char *path, inf_err *err) {
    struct stat st;
    if (stat(path, &st) != 0) return inf_fail(err, "%s: no such file or folder", path);
    inf_vocab_desc v = {0};
    char tj[4096], tc[4096];
    int rc;
    if (S_ISDIR(st.st_mode) || ends_with(path, ".json")) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(tj, sizeof tj, "%s/tokenizer.json", path);
            snprintf(tc, sizeof tc, "%s/tokenizer_config.json", path);
        } else {
            snprintf(tj, sizeof tj, "%s", path);
            const char *slash = strrchr(path, '/');
            int dir = slash ? (int)(slash - path + 1) : 0;
            snprintf(tc, sizeof tc, "%.*stokenizer_config.json", dir, path);
        }
        if (inf_vocab_from_hf(&v, tj, file_exists(tc) ? tc : NULL, err)) return -1;
        rc = inf_tok_create(tok, &v, err);
        inf_vocab_desc_free(&v);
        return rc;
    }
    inf_model_file *m = NULL;
    if (inf_model_open(&m, path, err)) return -1;
    rc = inf_tok_create(tok, &m->vocab, err);
    inf_model_close(m);
    return rc;
}

static char *read_stream(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) free(buf);
        buf = nb;
    }
    if (!buf) return NULL;
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Token bytes, printable: C escapes for control bytes and bytes that are
 * not complete UTF-8 characters on their own. */
static void print_piece(const char *b, size_t n) {
    size_t ok = inf_utf8_valid_prefix(b, n);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c == '\\')
            fputs("\\\\", stdout);
        else if (c < 0x20 || c == 0x7f || (c >= 0x80 && i >= ok))
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static void print_ids(const inf_tokenizer *tok, const int32_t *ids, int n, bool pieces) {
    for (int i = 0; i < n; i++) {
        if (pieces) {
            size_t len;
            const char *b = inf_tok_token_bytes(tok, ids[i], &len);
            printf("%d\t", ids[i]);
            print_piece(b, len);
            putchar('\n');
        } else {
            printf(i ? " %d" : "%d", ids[i]);
        }
    }
    if (!pieces) putchar('\n');
}

/* --pretokens: each piece printed on its own line, or added to a JSON array. */
static int print_pretoken(void *ctx, const char *piece, size_t len, int32_t added) {
    (void)ctx;
    (void)added;
    print_piece(piece, len);
    putchar('\n');
    return 0;
}

static int json_pretoken(void *ctx, const char *piece, size_t len, int32_t added) {
    (void)added;
    return json_array_append_new(ctx, json_stringn(piece, len));
}

/* --pretokens --jsonl: one input line's pieces as a JSON array of strings;
 * NULL, with a message, when the line fails. */
static json_t *jsonl_pretokens(const inf_tokenizer *tok, const json_t *j, bool parse_special,
                               long lineno) {
    inf_err err;
    json_t *out = json_array();
    if (!json_is_string(j))
        fprintf(stderr, "inferno tokenize: stdin line %ld: expected a JSON string\n", lineno);
    else if (!out)
        fprintf(stderr, "inferno tokenize: stdin line %ld: out of memory\n", lineno);
    else if (inf_tok_pretokenize(tok, json_string_value(j), json_string_length(j), parse_special,
                                 json_pretoken, out, &err) == 0)
        return out;
    else
        fprintf(stderr, "inferno tokenize: stdin line %ld: %s\n", lineno, err.msg);
    json_decref(out);
    return NULL;
}

static int run_jsonl(const inf_tokenizer *tok, bool parse_special, bool decode, bool pretokens) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long lineno = 0;
    int status = 0;
    inf_err err;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        json_error_t jerr;
        json_t *j = json_loadb(line, (size_t)got, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        json_t *out = NULL;
        if (!j) {
            fprintf(stderr, "inferno tokenize: stdin line %ld: %s\n", lineno, jerr.text);
        } else if (pretokens) {
            out = jsonl_pretokens(tok, j, parse_special, lineno);
        } else if (!decode) {
            int32_t *ids = NULL;
            int n = 0;
            if (!json_is_string(j))
                fprintf(stderr, "inferno tokenize: stdin line %ld: expected a JSON string\n",
                        lineno);
            else if (inf_tok_encode(tok, json_string_value(j), json_string_length(j), parse_special,
                                    &ids, &n, &err))
                fprintf(stderr, "inferno tokenize: stdin line %ld: %s\n", lineno, err.msg);
            else {
                out = json_array();
                for (int i = 0; i < n; i++)
                    json_array_append_new(out, json_integer(ids[i]));
            }
            free(ids);
        } else {
            size_t n = json_array_size(j);
            int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
            bool ok = json_is_array(j) && ids;
            for (size_t i = 0; ok && i < n; i++) {
                json_t *e = json_array_get(j, i);
                ok = json_is_integer(e) && json_integer_value(e) >= 0 &&
                     json_integer_value(e) < inf_tok_n_vocab(tok);
                if (ok) ids[i] = (int32_t)json_integer_value(e);
            }
            char *text = NULL;
            size_t len = 0;
            if (!ok)
                fprintf(stderr, "inferno tokenize: stdin line %ld: expected an array of ids\n",
                        lineno);
            else if (inf_tok_decode(tok, ids, (int)n, &text, &len, &err))
                fprintf(stderr, "inferno tokenize: stdin line %ld: %s\n", lineno, err.msg);
            else if (!(out = json_stringn(text, len)))
                fprintf(stderr,
                        "inferno tokenize: stdin line %ld: decoded text is not valid "
                        "UTF-8\n",
                        lineno);
            free(text);
            free(ids);
        }
        if (!out) status = 1;
        char *s = out ? json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        puts(s ? s : "null");
        free(s);
        json_decref(out);
        json_decref(j);
    }
    free(line);
    return status;
}

static int run_decode(const inf_tokenizer *tok, const char *text) {
    size_t cap = 64, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    const char *p = text;
    while (ids && *p) {
        char *end;
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',' || *p == '[' ||
               *p == ']')
            p++;
        if (!*p) break;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= inf_tok_n_vocab(tok)) {
            fprintf(stderr, "inferno tokenize: --decode: bad id at \"%.20s\"\n", p);
            free(ids);
            return 1;
        }
        if (n == cap) {
            int32_t *nid = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!nid) free(ids);
            ids = nid;
            if (!ids) break;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    if (!ids) {
        fprintf(stderr, "inferno tokenize: out of memory\n");
        return 1;
    }
    char *out;
    size_t len;
    inf_err err;
    int rc = inf_tok_decode(tok, ids, (int)n, &out, &len, &err);
    free(ids);
    if (rc) {
        fprintf(stderr, "inferno tokenize: %s\n", err.msg);
        return 1;
    }
    fwrite(out, 1, len, stdout);
    free(out);
    return 0;
}

/* CPU time of this thread: the rate on one core even when the machine is
 * shared with other work. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run_bench(const inf_tokenizer *tok, const char *text, size_t len, bool parse_special) {
    inf_err err;
    int32_t *ids = NULL;
    int n = 0;
    /* The first pass fills the word cache; it is reported on its own, and
     * the steady rate (as in a long-running server) is measured after it. */
    double t0 = cpu_s(), t;
    if (inf_tok_encode(tok, text, len, parse_special, &ids, &n, &err)) {
        fprintf(stderr, "inferno tokenize: %s\n", err.msg);
        return 1;
    }
    free(ids);
    double cold = cpu_s() - t0;
    t0 = cpu_s();
    size_t bytes = 0;
    int reps = 0;
    do {
        if (inf_tok_encode(tok, text, len, parse_special, &ids, &n, &err)) return 1;
        free(ids);
        bytes += len;
        reps++;
    } while ((t = cpu_s() - t0) < 2.0);
    printf("%zu bytes, %d tokens (%.2f bytes/token): first pass %.1f MB/s, then %d passes in "
           "%.3f s of CPU: %.1f MB/s\n",
           len, n, n ? (double)len / n : 0.0, (double)len / cold / 1e6, reps, t,
           (double)bytes / t / 1e6);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = INF_DEFAULT_MODEL;
    bool pieces = false, parse_special = true, jsonl = false, decode = false, bench = false,
         pretokens = false;
    int first_text = argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (++i >= argc) {
                fprintf(stderr, "inferno tokenize: %s needs a value\n", a);
                return 2;
            }
            model = argv[i];
        } else if (!strcmp(a, "--pieces"))
            pieces = true;
        else if (!strcmp(a, "--pretokens"))
            pretokens = true;
        else if (!strcmp(a, "--no-parse-special"))
            parse_special = false;
        else if (!strcmp(a, "--jsonl"))
            jsonl = true;
        else if (!strcmp(a, "--decode"))
            decode = true;
        else if (!strcmp(a, "--bench"))
            bench = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--")) {
            first_text = i + 1;
            break;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "inferno tokenize: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else {
            first_text = i;
            break;
        }
    }
    if (pretokens && (decode || bench || pieces)) {
        fprintf(stderr, "inferno tokenize: --pretokens goes with neither --decode, --bench nor "
                        "--pieces\n");
        return 2;
    }
    inf_err err;
    inf_tokenizer *tok = NULL;
    if (open_tokenizer(&tok, model, &err)) {
        fprintf(stderr, "inferno tokenize: %s\n", err.msg);
        return 1;
    }
    int status = 0;
    if (jsonl) {
        status = run_jsonl(tok, parse_special, decode, pretokens);
        inf_tok_free(tok);
        return status;
    }
    char *text = NULL;
    size_t len = 0;
    if (first_text < argc) {
        for (int i = first_text; i < argc; i++)
            len += strlen(argv[i]) + 1;
        text = malloc(len);
        len = 0;
        for (int i = first_text; text && i < argc; i++) {
            size_t l = strlen(argv[i]);
            if (i > first_text) text[len++] = ' ';
            memcpy(text + len, argv[i], l);
            len += l;
        }
        if (text) text[len] = 0;
    } else {
        text = read_stream(stdin, &len);
    }
    if (!text) {
        fprintf(stderr, "inferno tokenize: out of memory\n");
        inf_tok_free(tok);
        return 1;
    }
    if (decode)
        status = run_decode(tok, text);
    else if (pretokens) {
        if (inf_tok_pretokenize(tok, text, len, parse_special, print_pretoken, NULL, &err)) {
            fprintf(stderr, "inferno tokenize: %s\n", err.msg);
            status = 1;
        }
    } else if (bench)
        status = run_bench(tok, text, len, parse_special);
    else {
        int32_t *ids = NULL;
        int n = 0;
        if (inf_tok_encode(tok, text, len, parse_special, &ids, &n, &err)) {
            fprintf(stderr, "inferno tokenize: %s\n", err.msg);
            status = 1;
        } else {
            print_ids(tok, ids, n, pieces);
        }
        free(ids);
    }
    free(text);
    inf_tok_free(tok);
    return status;
}
