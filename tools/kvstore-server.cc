// kvstore-server - a ready scheduler/server program for the distributed stores.
//
// The role comes from the environment (DMLC_ROLE=scheduler or server, plus the DMLC_*
// variables that kvstore-launch sets). The server applies the optimizer that workers send
// with KVStoreSetOptimizer; `--optimizer SPEC` installs one before any worker connects.
// Exit status: 0 when the job ended cleanly, 1 otherwise (the reason is printed).
#include <stdio.h>
#include <string.h>

#include <kvstore/kvstore.h>

static int Usage(const char* argv0) {
  fprintf(stderr,
          "usage: DMLC_ROLE=scheduler|server DMLC_PS_ROOT_URI=... DMLC_PS_ROOT_PORT=... \\\n"
          "       DMLC_NUM_WORKER=... DMLC_NUM_SERVER=... %s [--optimizer SPEC]\n"
          "Runs the scheduler or a parameter server of a kvstore job (see kvstore-launch).\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  const char* optimizer = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--optimizer") == 0 && i + 1 < argc) {
      optimizer = argv[++i];
    } else {
      return Usage(argv[0]);
    }
  }
  if (!KVHasFeature(KV_FEATURE_DIST)) {
    fprintf(stderr, "kvstore-server: this libkvstore was built without the distributed stores\n");
    return 1;
  }
  if (KVIsWorkerNode()) {
    fprintf(stderr, "kvstore-server: DMLC_ROLE must be scheduler or server\n");
    return Usage(argv[0]);
  }
  KVStoreHandle kv = NULL;
  if (KVStoreCreate("dist", &kv) != 0) {
    fprintf(stderr, "kvstore-server: %s\n", KVGetLastError());
    return 1;
  }
  if (optimizer != NULL && KVStoreSetOptimizer(kv, optimizer) != 0) {
    fprintf(stderr, "kvstore-server: %s\n", KVGetLastError());
    KVStoreFree(kv);
    return 1;
  }
  int rc = KVStoreRunServer(kv, NULL, NULL);
  if (rc != 0) fprintf(stderr, "kvstore-server: %s: %s\n", KVErrorName(rc), KVGetLastError());
  KVStoreFree(kv);
  return rc == 0 ? 0 : 1;
}
