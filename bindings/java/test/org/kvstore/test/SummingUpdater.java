package org.kvstore.test;

import java.util.concurrent.atomic.AtomicInteger;
import org.kvstore.NDArray;
import org.kvstore.StrUpdater;
import org.kvstore.Updater;

/** An updater for either key kind that adds the pushed value and counts its releases. */
final class SummingUpdater implements Updater, StrUpdater {
  private final AtomicInteger released;

  SummingUpdater(AtomicInteger released) {
    this.released = released;
  }

  @Override
  public void update(int key, NDArray recv, NDArray stored) {
    stored.addInPlace(recv);
  }

  @Override
  public void update(String key, NDArray recv, NDArray stored) {
    stored.addInPlace(recv);
  }

  @Override
  public void released() {
    released.incrementAndGet();
  }
}
