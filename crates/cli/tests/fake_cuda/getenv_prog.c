/* Prints what getenv answers for the shim's probe and for HOME: under the getenv shim,
 * "shimmed" and the real HOME. */
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    const char *probe = getenv("GETENV_SHIM_PROBE"), *home = getenv("HOME");
    printf("%s %s\n", probe ? probe : "(unset)", home ? home : "(unset)");
    return 0;
}
