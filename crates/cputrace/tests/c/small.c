/* The tracer's test program: known objects, pointer stores and loads, two threads, a
 * read-only region, a realloc and frees. */
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include "../../../../bench/bcache/programs/gpusan_cputrace.h"

struct node { long value; struct node *next; };
struct node **table; /* 4 pointers to nodes */
long *ro;

static void *worker(void *arg) {
  long k = (long)arg;
  for (int i = 0; i < 4; i++) {
    struct node *n = table[i];      /* pointer load */
    if (i % 2 == k) n->value += ro[i]; /* load and store in the node, read-only load */
  }
  return NULL;
}

int main(void) {
  table = malloc(4 * sizeof *table);
  for (int i = 0; i < 4; i++) {
    table[i] = malloc(sizeof(struct node)); /* pointer stores, offset 0 */
    table[i]->value = i;
    table[i]->next = NULL;
  }
  table[0]->next = (struct node *)((char *)table[1] + 8); /* a pointer into node 1, offset 8 */
  ro = calloc(4, sizeof *ro);
  for (int i = 0; i < 4; i++) ro[i] = 10 * i;
  GPUSAN_READ_ONLY(ro, 4 * sizeof *ro);
  pthread_t t[2];
  for (long k = 0; k < 2; k++) pthread_create(&t[k], NULL, worker, (void *)k);
  for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  long sum = 0;
  for (int i = 0; i < 4; i++) sum += table[i]->value;
  ro = realloc(ro, 64);
  for (int i = 0; i < 4; i++) free(table[i]);
  free(table);
  free(ro);
  printf("%ld\n", sum);
  return 0;
}
