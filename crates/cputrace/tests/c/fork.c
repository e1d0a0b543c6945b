/* A program that forks: the child allocates and exits; the parent's trace stays whole. */
#include <stdlib.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

long *parent_data;

int main(void) {
  parent_data = malloc(24);
  parent_data[0] = 1;
  pid_t pid = fork();
  if (pid == 0) {
    long *child = malloc(40);
    child[0] = 2;
    free(child);
    exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  parent_data[1] = 3;
  free(parent_data);
  printf("%d\n", WEXITSTATUS(status));
  return 0;
}
