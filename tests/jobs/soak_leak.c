/* An injected leak for tests/jobs/soak.py's self-check: preloaded (LD_PRELOAD) into the ranks of a
 * soak run, it starts a thread in each process that mpirun started as a rank (OMPI_COMM_WORLD_RANK
 * set) which, every 10 ms, leaks what DSP_SOAK_LEAK names:
 *   rss:N     N bytes per second, allocated and written (so they are resident)
 *   fd:N      N open file descriptors per second (/dev/null)
 *   thread:N  N sleeping threads per second
 * The soak must then fail naming that quantity. Built by soak.py with the system C compiler. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char kind[16];
static double rate;

static void* sleeper(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

static void* leak(void* arg) {
  (void)arg;
  const struct timespec tick = {0, 10 * 1000 * 1000};
  double owed = 0;
  for (;;) {
    nanosleep(&tick, NULL);
    owed += rate / 100;
    if (owed < 1) continue;
    const size_t n = (size_t)owed;
    owed -= (double)n;
    if (strcmp(kind, "rss") == 0) {
      char* p = malloc(n);
      if (p) memset(p, 1, n);
    } else if (strcmp(kind, "fd") == 0) {
      for (size_t i = 0; i < n; ++i) open("/dev/null", O_RDONLY);
    } else if (strcmp(kind, "thread") == 0) {
      for (size_t i = 0; i < n; ++i) {
        pthread_t t;
        if (pthread_create(&t, NULL, sleeper, NULL) == 0) pthread_detach(t);
      }
    }
  }
  return NULL;
}

__attribute__((constructor)) static void start(void) {
  const char* spec = getenv("DSP_SOAK_LEAK");
  if (spec == NULL || getenv("OMPI_COMM_WORLD_RANK") == NULL) return;
  const char* colon = strchr(spec, ':');
  if (colon == NULL || (size_t)(colon - spec) >= sizeof kind) return;
  memcpy(kind, spec, (size_t)(colon - spec));
  rate = atof(colon + 1);
  pthread_t t;
  if (pthread_create(&t, NULL, leak, NULL) == 0) pthread_detach(t);
}
