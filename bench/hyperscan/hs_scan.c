/* The reference for siftd's scan (issue 5): Hyperscan, the multi-regex engine rspamd
 * uses, given the same stock SpamAssassin regex rules and the same texts.
 *
 * Reads DIR/rules and DIR/texts as `cargo bench -p siftd-common --bench text_rules`
 * writes them (SIFT_BENCH_EXPORT=DIR), compiles each target's rules into one block-mode
 * database (every rule alone first: the ones Hyperscan refuses, backreferences and
 * lookarounds mostly, are left out, counted and named in DIR/refused, with Hyperscan's
 * reason in DIR/refused-why; the databases are kept as DIR/TARGET.hsdb for a next run on
 * the same export), then scans every message's texts with them, PASSES times, and prints
 * the fastest pass's CPU time per message, the databases' size (shared by all processes)
 * and the scratch's (each worker's own). The refused rules go to PCRE2 with its JIT, as
 * rspamd's fallback does, timed apart over the same texts.
 *
 *   hs_scan DIR [PASSES]
 */
#define _POSIX_C_SOURCE 200809L
#define PCRE2_CODE_UNIT_WIDTH 8
#include <hs/hs.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TARGETS 4
static const char *target_names[TARGETS] = {"body", "rawbody", "uri", "full"};

struct rules {
    char **regexes;
    unsigned *flags;
    unsigned *ids;
    size_t len, cap;
    size_t refused;
    /* The refused ones PCRE2 compiles (JIT), as rspamd falls back to PCRE. */
    pcre2_code **fallback;
    size_t fallback_len, fallback_cap;
    size_t neither;
};

struct text {
    const unsigned char *bytes;
    size_t len;
};

static void die(const char *what) {
    fprintf(stderr, "hs_scan: %s\n", what);
    exit(1);
}

static int target_of(const char *name) {
    for (int t = 0; t < TARGETS; t++) {
        if (strcmp(name, target_names[t]) == 0) return t;
    }
    return -1;
}

/* Perl modifiers as Hyperscan flags; `x` is written into the regex as (?x). */
static unsigned flags_of(const char *perl, int *extended) {
    unsigned f = HS_FLAG_SINGLEMATCH | HS_FLAG_ALLOWEMPTY;
    *extended = 0;
    for (const char *c = perl; *c; c++) {
        switch (*c) {
        case 'i': f |= HS_FLAG_CASELESS; break;
        case 's': f |= HS_FLAG_DOTALL; break;
        case 'm': f |= HS_FLAG_MULTILINE; break;
        case 'x': *extended = 1; break;
        default: break;
        }
    }
    return f;
}

static void push(struct rules *r, char *regex, unsigned flags) {
    if (r->len == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 256;
        r->regexes = realloc(r->regexes, r->cap * sizeof *r->regexes);
        r->flags = realloc(r->flags, r->cap * sizeof *r->flags);
        r->ids = realloc(r->ids, r->cap * sizeof *r->ids);
        if (!r->regexes || !r->flags || !r->ids) die("out of memory");
    }
    r->regexes[r->len] = regex;
    r->flags[r->len] = flags;
    r->ids[r->len] = (unsigned)r->len;
    r->len++;
}

/* The regex compiled by PCRE2 with JIT, Perl's modifiers as its options; NULL if refused. */
static pcre2_code *pcre2_of(const char *regex, const char *modifiers) {
    uint32_t options = 0;
    for (const char *c = modifiers; *c; c++) {
        switch (*c) {
        case 'i': options |= PCRE2_CASELESS; break;
        case 's': options |= PCRE2_DOTALL; break;
        case 'm': options |= PCRE2_MULTILINE; break;
        case 'x': options |= PCRE2_EXTENDED; break;
        default: break;
        }
    }
    int error;
    PCRE2_SIZE offset;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)regex, PCRE2_ZERO_TERMINATED, options, &error, &offset, NULL);
    if (code) pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return code;
}

static void push_fallback(struct rules *r, pcre2_code *code) {
    if (r->fallback_len == r->fallback_cap) {
        r->fallback_cap = r->fallback_cap ? 2 * r->fallback_cap : 64;
        r->fallback = realloc(r->fallback, r->fallback_cap * sizeof *r->fallback);
        if (!r->fallback) die("out of memory");
    }
    r->fallback[r->fallback_len++] = code;
}

/* Reads the rules; writes the names of those Hyperscan refuses to `refused_path`. */
static void read_rules(const char *path, const char *refused_path, struct rules *rules) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open the rules file");
    FILE *refused = fopen(refused_path, "w");
    if (!refused) die("cannot write the refused rules' names");
    char why_path[4200];
    snprintf(why_path, sizeof why_path, "%s-why", refused_path);
    FILE *why = fopen(why_path, "w");
    if (!why) die("cannot write why rules were refused");
    char target[16], modifiers[16], name[256];
    size_t len;
    while (fscanf(f, "%15s %15s %zu %255s", target, modifiers, &len, name) == 4) {
        if (fgetc(f) != '\n') die("rules file: no line end after a header");
        int extended;
        unsigned flags = flags_of(strcmp(modifiers, "-") == 0 ? "" : modifiers, &extended);
        char *regex = malloc(len + 5);
        if (!regex) die("out of memory");
        size_t at = 0;
        if (extended) {
            memcpy(regex, "(?x)", 4);
            at = 4;
        }
        if (fread(regex + at, 1, len, f) != len) die("rules file: short regex");
        regex[at + len] = '\0';
        fgetc(f);
        int t = target_of(target);
        if (t < 0) die("rules file: unknown target");
        hs_database_t *alone = NULL;
        hs_compile_error_t *error = NULL;
        if (hs_compile(regex, flags, HS_MODE_BLOCK, NULL, &alone, &error) != HS_SUCCESS) {
            fprintf(why, "%s\t%s\n", name, error && error->message ? error->message : "compile failed");
            hs_free_compile_error(error);
            rules[t].refused++;
            fprintf(refused, "%s\n", name);
            pcre2_code *code = pcre2_of(regex + (extended ? 4 : 0), strcmp(modifiers, "-") == 0 ? "" : modifiers);
            if (code) {
                push_fallback(&rules[t], code);
            } else {
                rules[t].neither++;
            }
            free(regex);
            continue;
        }
        hs_free_database(alone);
        push(&rules[t], regex, flags);
    }
    fclose(f);
    fclose(refused);
    fclose(why);
}

/* A whole file, or NULL when it cannot be read. */
static unsigned char *read_optional(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc(size > 0 ? (size_t)size : 1);
    if (bytes && size >= 0 && fread(bytes, 1, (size_t)size, f) != (size_t)size) {
        free(bytes);
        bytes = NULL;
    }
    fclose(f);
    *len = size > 0 ? (size_t)size : 0;
    return bytes;
}

static unsigned char *read_file(const char *path, size_t *len) {
    unsigned char *bytes = read_optional(path, len);
    if (!bytes) die("cannot read the texts file");
    return bytes;
}

/* Splits the texts file into messages of TARGETS texts each. */
static struct text *split_texts(const unsigned char *bytes, size_t len, size_t *messages) {
    size_t cap = 1024, n = 0, at = 0;
    struct text *texts = malloc(cap * sizeof *texts);
    while (at < len) {
        char *end;
        size_t size = strtoul((const char *)bytes + at, &end, 10);
        if (*end != '\n') die("texts file: bad length");
        at = (size_t)((const unsigned char *)end - bytes) + 1;
        if (size > len - at) die("texts file: short text");
        if (n == cap) {
            cap *= 2;
            texts = realloc(texts, cap * sizeof *texts);
            if (!texts) die("out of memory");
        }
        texts[n].bytes = bytes + at;
        texts[n].len = size;
        n++;
        at += size;
    }
    if (n % TARGETS != 0) die("texts file: not four texts a message");
    *messages = n / TARGETS;
    return texts;
}

static int on_match(unsigned id, unsigned long long from, unsigned long long to, unsigned flags, void *context) {
    (void)id, (void)from, (void)to, (void)flags;
    ++*(unsigned long *)context;
    return 0;
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 2) die("usage: hs_scan DIR [PASSES]");
    int passes = argc > 2 ? atoi(argv[2]) : 3;
    if (passes < 1) passes = 1;
    char path[4096];
    struct rules rules[TARGETS] = {0};
    char refused_path[4096];
    snprintf(path, sizeof path, "%s/rules", argv[1]);
    snprintf(refused_path, sizeof refused_path, "%s/refused", argv[1]);
    double started = cpu_seconds();
    read_rules(path, refused_path, rules);

    hs_database_t *db[TARGETS] = {0};
    hs_scratch_t *scratch = NULL;
    size_t db_bytes = 0;
    for (int t = 0; t < TARGETS; t++) {
        if (rules[t].len == 0) continue;
        /* A database compiled before for the same rules is read back: compiling takes minutes. */
        snprintf(path, sizeof path, "%s/%s.hsdb", argv[1], target_names[t]);
        size_t saved_len = 0;
        char *saved = (char *)read_optional(path, &saved_len);
        if (saved && hs_deserialize_database(saved, saved_len, &db[t]) != HS_SUCCESS) db[t] = NULL;
        free(saved);
        if (!db[t]) {
            hs_compile_error_t *error = NULL;
            if (hs_compile_multi((const char *const *)rules[t].regexes, rules[t].flags, rules[t].ids, (unsigned)rules[t].len,
                                 HS_MODE_BLOCK, NULL, &db[t], &error) != HS_SUCCESS) {
                fprintf(stderr, "hs_scan: %s: %s\n", target_names[t], error ? error->message : "compile failed");
                return 1;
            }
            char *image = NULL;
            size_t image_len = 0;
            if (hs_serialize_database(db[t], &image, &image_len) == HS_SUCCESS) {
                FILE *f = fopen(path, "wb");
                if (f) {
                    fwrite(image, 1, image_len, f);
                    fclose(f);
                }
                free(image);
            }
        }
        size_t size = 0;
        hs_database_size(db[t], &size);
        db_bytes += size;
        if (hs_alloc_scratch(db[t], &scratch) != HS_SUCCESS) die("cannot allocate scratch");
    }
    double compiled = cpu_seconds() - started;
    size_t scratch_bytes = 0;
    if (scratch) hs_scratch_size(scratch, &scratch_bytes);

    snprintf(path, sizeof path, "%s/texts", argv[1]);
    size_t len, messages;
    unsigned char *bytes = read_file(path, &len);
    struct text *texts = split_texts(bytes, len, &messages);

    /* Each target's pass over every message, the fastest of PASSES. */
    double fastest[TARGETS];
    size_t text_bytes[TARGETS] = {0};
    unsigned long matches = 0;
    for (int t = 0; t < TARGETS; t++) {
        fastest[t] = 0.0;
        if (!db[t]) continue;
        fastest[t] = 1e300;
        for (int pass = 0; pass < passes; pass++) {
            unsigned long found = 0;
            text_bytes[t] = 0;
            double begun = cpu_seconds();
            for (size_t m = 0; m < messages; m++) {
                const struct text *x = &texts[m * TARGETS + t];
                text_bytes[t] += x->len;
                if (hs_scan(db[t], (const char *)x->bytes, (unsigned)x->len, 0, scratch, on_match, &found) != HS_SUCCESS) {
                    die("scan failed");
                }
            }
            double took = cpu_seconds() - begun;
            if (took < fastest[t]) fastest[t] = took;
            if (pass == 0) matches += found;
        }
    }
    /* The fallback's pass per target: every refused rule that PCRE2 compiled, each text. */
    double fallback_fastest[TARGETS];
    unsigned long fallback_errors = 0;
    pcre2_match_data *match_data = pcre2_match_data_create(64, NULL);
    pcre2_match_context *match_context = pcre2_match_context_create(NULL);
    pcre2_jit_stack *jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
    if (!match_data || !match_context || !jit_stack) die("out of memory");
    pcre2_jit_stack_assign(match_context, NULL, jit_stack);
    for (int t = 0; t < TARGETS; t++) {
        fallback_fastest[t] = 0.0;
        if (rules[t].fallback_len == 0) continue;
        fallback_fastest[t] = 1e300;
        for (int pass = 0; pass < passes; pass++) {
            double begun = cpu_seconds();
            for (size_t m = 0; m < messages; m++) {
                const struct text *x = &texts[m * TARGETS + t];
                for (size_t r = 0; r < rules[t].fallback_len; r++) {
                    int rc = pcre2_match(rules[t].fallback[r], x->bytes, x->len, 0, 0, match_data, match_context);
                    if (rc > 0) {
                        matches += pass == 0;
                    } else if (rc != PCRE2_ERROR_NOMATCH) {
                        fallback_errors += pass == 0;
                    }
                }
            }
            double took = cpu_seconds() - begun;
            if (took < fallback_fastest[t]) fallback_fastest[t] = took;
        }
    }

    size_t kept = 0, refused = 0;
    double total = 0.0;
    double n = (double)(messages ? messages : 1);
    for (int t = 0; t < TARGETS; t++) {
        printf("%s: %zu rules compiled, %zu refused; %.0f bytes a message, %.1f us/message\n", target_names[t], rules[t].len,
               rules[t].refused, (double)text_bytes[t] / n, fastest[t] * 1e6 / n);
        kept += rules[t].len;
        refused += rules[t].refused;
        total += fastest[t];
    }
    size_t fallback = 0, neither = 0;
    double fallback_total = 0.0;
    for (int t = 0; t < TARGETS; t++) {
        if (rules[t].refused == 0) continue;
        printf("fallback %s: %zu rules compiled by PCRE2, %zu by neither; %.1f us/message\n", target_names[t],
               rules[t].fallback_len, rules[t].neither, fallback_fastest[t] * 1e6 / n);
        fallback += rules[t].fallback_len;
        neither += rules[t].neither;
        fallback_total += fallback_fastest[t];
    }
    printf("fallback: %zu rules compiled by PCRE2 (JIT), %zu by neither, %lu match errors; %.1f us/message\n", fallback,
           neither, fallback_errors, fallback_total * 1e6 / n);
    printf("messages: %zu\n", messages);
    printf("rules: %zu compiled, %zu refused\n", kept, refused);
    printf("compile: %.1f s\n", compiled);
    printf("databases: %.1f MiB\n", (double)db_bytes / 1048576.0);
    printf("scratch: %.1f KiB\n", (double)scratch_bytes / 1024.0);
    printf("matches a pass: %lu\n", matches);
    printf("scan: %.1f us/message\n", total * 1e6 / n);
    return 0;
}
