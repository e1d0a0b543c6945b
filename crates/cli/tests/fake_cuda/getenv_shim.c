/* A preloaded shim of the kind profilers and memory hooks are: it stands in for getenv
 * and forwards to the next definition, found with dlsym(RTLD_NEXT). Given itself back
 * (RTLD_NEXT resolved relative to another library), it would recurse until the stack ran
 * out: it says so and exits instead, so the failure is named. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *(*next_getenv)(const char *);

char *getenv(const char *name) {
    if (!next_getenv) {
        next_getenv = (char *(*)(const char *))dlsym(RTLD_NEXT, "getenv");
        if (next_getenv == getenv || next_getenv == NULL) {
            static const char msg[] = "getenv_shim: dlsym(RTLD_NEXT, \"getenv\") did not find the next getenv\n";
            write(2, msg, sizeof msg - 1);
            _exit(86);
        }
    }
    if (strcmp(name, "GETENV_SHIM_PROBE") == 0)
        return "shimmed";
    return next_getenv(name);
}
