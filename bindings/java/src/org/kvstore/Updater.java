package org.kvstore;

/**
 * Merges the summed pushed value into the stored value of an int key, in place:
 * {@code kv.setUpdater((key, recv, stored) -> stored.addInPlace(recv.mul(2)))}.
 *
 * <p>It runs on the thread that called push (for in-process stores). {@code recv} and
 * {@code stored} are borrowed for the call: they are invalid afterwards, closing them does not
 * free anything, and they have no zero-copy view ({@code asByteBuffer()} throws). An exception
 * thrown here fails the push (the stored value is unchanged) and is rethrown, unchanged, to the
 * caller of push. It must not call data functions of the same store, and closing that store
 * from here throws {@link KVBusyException} (the push is still running). After row_sparse
 * pushes {@code recv} is row_sparse ({@link NDArray#isRowSparse()}): merge
 * {@code recv.toDense()}, or its {@code indices()} and {@code data()}.
 */
@FunctionalInterface
public interface Updater {
  void update(int key, NDArray recv, NDArray stored);

  /** Called once when the store stops using this updater (replaced, cleared or store closed). */
  default void released() {}
}
