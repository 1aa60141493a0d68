/*
 * tinyfin/env.h - one set of rules for reading TINYFIN_* environment variables.
 *
 * Header-only C, compiled into libtinyfin and into each plugin that reads a variable (through
 * tf_host_api.get_env), so the core and every plugin agree on what a valid value is and word the
 * warning about a bad one the same way. Nothing here crosses the ABI: each side has its own copy
 * of these inline functions and passes only C strings and integers.
 *
 * The rules (docs/architecture.md, "Environment variables"):
 *   1. An unset variable means its default, silently; so does one set to "" (how `VAR= cmd` and
 *      meson's test environment clear a variable).
 *   2. A variable whose text is not a valid value - "abc", "-1", "1e3", " 4", "4k", a word in
 *      the wrong case - is one warning line that names the variable, its text, what was
 *      expected and what is used instead (tf_env_describe_bad).
 *   3. With TINYFIN_STRICT=1 the same text is an error instead: the core raises BackendError from
 *      the first tinyfin call; a plugin fails its init with it, which the core reports the same
 *      way for the cpu plugin and as that backend's init failure for the others.
 */
#ifndef TINYFIN_ENV_H
#define TINYFIN_ENV_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What reading one variable found. */
typedef enum tf_env_result {
    /* Not set: use the default, say nothing. */
    TF_ENV_UNSET = 0,
    /* Set to a valid value. */
    TF_ENV_VALID = 1,
    /* Set to text that is not a valid value: warn (or fail under TINYFIN_STRICT=1). */
    TF_ENV_INVALID = 2
} tf_env_result;

/*
 * Parses text as a plain decimal integer in [min, max]: an optional '-' and digits only, no
 * spaces, exponent, fraction or suffix. NULL and "" are TF_ENV_UNSET; everything else that is
 * not such an integer in range is TF_ENV_INVALID (*out untouched).
 */
static inline tf_env_result tf_env_parse_integer(const char *text, int64_t min, int64_t max, int64_t *out) {
    if (!text || !*text) return TF_ENV_UNSET;
    const char *p = text[0] == '-' ? text + 1 : text;
    if (*p < '0' || *p > '9') return TF_ENV_INVALID; /* strtoll would skip spaces and take '+' */
    errno = 0;
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) return TF_ENV_INVALID;
    *out = (int64_t)v;
    return TF_ENV_VALID;
}

/*
 * Looks text up in words[0..count): TF_ENV_VALID with *index set when it is one of them
 * (case-sensitive, as documented), TF_ENV_UNSET for NULL and "", TF_ENV_INVALID otherwise.
 */
static inline tf_env_result tf_env_parse_word(const char *text, const char *const *words, int count, int *index) {
    if (!text || !*text) return TF_ENV_UNSET;
    for (int i = 0; i < count; ++i)
        if (strcmp(text, words[i]) == 0) {
            *index = i;
            return TF_ENV_VALID;
        }
    return TF_ENV_INVALID;
}

/*
 * The one wording of a bad value, written into buf (always terminated, cut to fit):
 *   TINYFIN_THREADS='abc' is not an integer in [1, 1024]; using 8 (the cores this process may use)
 * expected: what a valid value is; instead: the value used in its place and why.
 */
static inline void tf_env_describe_bad(char *buf, size_t size, const char *name, const char *text, const char *expected,
                                       const char *instead) {
    if (!buf || size == 0) return;
        /* Cutting a long value to fit is intended. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
    snprintf(buf, size, "%s='%s' is not %s; using %s", name, text ? text : "", expected, instead);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}

/* A switch: "1" on, "0" off (TF_ENV_VALID); NULL and "" TF_ENV_UNSET; anything else TF_ENV_INVALID. */
static inline tf_env_result tf_env_parse_flag(const char *text, int *on) {
    static const char *const words[] = {"0", "1"};
    return tf_env_parse_word(text, words, 2, on);
}

/*
 * TINYFIN_STRICT as the core reads it: on for "1", off when unset, "" or "0". Any other text is
 * TF_ENV_INVALID and counts as on (*on = 1), so a typo never silently weakens the checks.
 */
static inline tf_env_result tf_env_parse_strict(const char *text, int *on) {
    *on = 0;
    if (!text || !*text) return TF_ENV_UNSET;
    if (strcmp(text, "0") == 0) return TF_ENV_VALID;
    *on = 1;
    return strcmp(text, "1") == 0 ? TF_ENV_VALID : TF_ENV_INVALID;
}

#endif /* TINYFIN_ENV_H */
