package org.kvstore;

/** The string-key twin of {@link Updater}: receives the original string key. */
@FunctionalInterface
public interface StrUpdater {
  void update(String key, NDArray recv, NDArray stored);

  /** Called once when the store stops using this updater (replaced, cleared or store closed). */
  default void released() {}
}
