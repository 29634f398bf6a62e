/* row_sparse.c - an embedding table trained through row_sparse gradients: a table of 6 rows
 * of 2 float32 values lives in a local store under lazy sgd (only the rows a batch touches
 * are updated, weight decay included), two "devices" push the gradients of the rows their
 * batch used, and KVStoreRowSparsePull fetches just the rows the next batch needs, in any
 * order and with duplicates. Works alike on the device and dist_* stores (where only those
 * rows cross the network). The rules: kvstore.h "Row-sparse arrays", KVStoreRowSparsePull;
 * docs/OPTIMIZERS.md "lazy updates". */
#include "example_util.h"

static const int64_t kTable[2] = {6, 2};

/* A row_sparse gradient of the table holding `n` rows `ids`, every value `value`. */
static KVArrayHandle row_grad(const int64_t* ids, int64_t n, float value) {
  KVArrayHandle g = NULL;
  float data[12];
  for (int i = 0; i < 2 * n; ++i) data[i] = value;
  TRY(KVArrayCreateRowSparse(kTable, 2, KV_FLOAT32, KV_CPU, 0, ids, n, &g));
  TRY(KVArrayCopyFromHost(g, data, (size_t)(2 * n) * sizeof(float)));
  return g;
}

static void print_rows(const char* title, KVArrayHandle a) {
  int64_t n = 0, ids[6];
  float data[12];
  TRY(KVArrayGetNumRows(a, &n));
  TRY(KVArrayGetRowIds(a, ids, 6));
  TRY(KVArrayCopyToHost(a, data, (size_t)(2 * n) * sizeof(float)));
  printf("%s\n", title);
  for (int64_t i = 0; i < n; ++i) printf("  row %lld: %g %g\n", (long long)ids[i], data[2 * i], data[2 * i + 1]);
}

int main(void) {
  const int key = 0;
  KVStoreHandle kv = NULL;
  TRY(KVStoreCreate("local", &kv));
  TRY(KVStoreSetOptimizer(kv, "sgd(learning_rate=0.5,wd=0.1)"));

  KVArrayHandle table = NULL;
  TRY(KVArrayCreate(kTable, 2, KV_FLOAT32, KV_CPU, 0, &table));
  TRY(KVArrayFill(table, 1.0));
  TRY(KVStoreInit(kv, 1, &key, &table));

  /* Device 0's batch used rows 1 and 4, device 1's rows 4 and 5: the store sums the two
   * gradients by the union of their rows {1, 4, 5} and updates only those rows:
   * w = (1 - lr*wd)*w - lr*g = 0.95 - 0.5*g. */
  const int64_t rows0[2] = {1, 4}, rows1[2] = {4, 5};
  KVArrayHandle grads[2] = {row_grad(rows0, 2, 0.5f), row_grad(rows1, 2, 0.25f)};
  const int keys[2] = {key, key};
  TRY(KVStorePush(kv, 2, keys, grads, 0));

  /* The next batch needs rows 5, 0 and 4 (4 twice): the output holds exactly {0, 4, 5}. */
  const float wanted[4] = {5, 0, 4, 4};
  const int64_t four = 4;
  KVArrayHandle row_ids = NULL, out = NULL;
  TRY(KVArrayCreate(&four, 1, KV_FLOAT32, KV_CPU, 0, &row_ids));
  TRY(KVArrayCopyFromHost(row_ids, wanted, sizeof wanted));
  TRY(KVArrayCreateRowSparse(kTable, 2, KV_FLOAT32, KV_CPU, 0, NULL, 0, &out));
  TRY(KVStoreRowSparsePull(kv, 1, &key, &out, &row_ids, 0));
  print_rows("rows 5, 0, 4, 4 after one lazy step:", out);

  /* The whole table, dense: rows 2 and 3 were never pushed and kept their value (a dense
   * update would have decayed them too). */
  float dense[12];
  TRY(KVStorePull(kv, 1, &key, &table, 0));
  TRY(KVArrayCopyToHost(table, dense, sizeof dense));
  printf("the whole table:\n");
  for (int r = 0; r < 6; ++r) printf("  row %d: %g %g\n", r, dense[2 * r], dense[2 * r + 1]);

  KVArrayFree(grads[0]);
  KVArrayFree(grads[1]);
  KVArrayFree(row_ids);
  KVArrayFree(out);
  KVArrayFree(table);
  TRY(KVStoreFree(kv));
  return 0;
}
