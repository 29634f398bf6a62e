package org.kvstore;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.Arrays;
import java.util.function.Consumer;
import java.util.function.IntFunction;
import org.kvstore.swig.ArrayHandle;
import org.kvstore.swig.KVBinaryOp;
import org.kvstore.swig.KVStoreLib;

/**
 * An n-dimensional array of one dtype on one device, owned by this object: dense, or
 * row_sparse ({@link #stype()}; see "Row-sparse storage" below).
 *
 * <p>Release is deterministic with {@link #close()} (try-with-resources); an array that is never
 * closed is freed after it becomes unreachable (a Cleaner), so temporaries such as
 * {@code a.mul(2)} do not leak. Using a closed array throws IllegalStateException. Arrays passed
 * to an {@link Updater} are borrowed: valid only during the call.
 *
 * <p>Every native call runs through {@link #call}: each array it is given is entered for the
 * call, so {@link #close()} on another thread meanwhile throws {@link KVBusyException} instead of
 * freeing memory in use, and fenced until it returned, so the Cleaner can never free an array
 * while a call on it is still running (a temporary such as {@code NDArray.ones(s).mul(2)} may
 * otherwise become unreachable mid-call under the JIT).
 *
 * <p>Host data moves in and out as Java arrays of the matching element type (float[] for
 * float32, double[] float64, short[] float16 bit patterns, byte[] uint8, int[] int32, long[]
 * int64) or as direct NIO buffers; {@link #asByteBuffer()} is a zero-copy view of a CPU array
 * that keeps the array's memory alive for as long as the view is reachable.
 */
public final class NDArray implements AutoCloseable {
  private static final Cleaner CLEANER = Cleaner.create();

  /** Shared by this object, the calls running on the array and its views; never this object. */
  final Lifetime<ArrayHandle> life;
  private final Cleaner.Cleanable cleanable; // null for a borrowed array
  private final Shape shape;
  private final DType dtype;
  private final Context context;
  private final StorageType stype; // fixed for the array's life

  private NDArray(ArrayHandle handle, boolean owned) {
    int[] ndim = new int[1];
    KVStoreLib.KVArrayGetNDim(handle, ndim);
    long[] dims = new long[ndim[0]];
    KVStoreLib.KVArrayGetShape(handle, dims, ndim);
    this.shape = Shape.of(dims);
    int[] dt = new int[1];
    KVStoreLib.KVArrayGetDType(handle, dt);
    this.dtype = DType.fromCode(dt[0]);
    int[] devType = new int[1];
    int[] devId = new int[1];
    KVStoreLib.KVArrayGetContext(handle, devType, devId);
    this.context = Context.of(devType[0], devId[0]);
    int[] st = new int[1];
    KVStoreLib.KVArrayGetStorageType(handle, st);
    this.stype = StorageType.fromCode(st[0]);
    if (owned) {
      this.life = new Lifetime<>(handle, NDArray::free, "NDArray", "NDArray is closed");
      // Registered last: if a query above throws, adopt() frees the handle itself.
      this.cleanable = CLEANER.register(this, life::closeQuietly);
    } else {
      this.life = new Lifetime<>(handle, null, "NDArray",
          "NDArray is a borrowed updater argument that is no longer valid");
      this.cleanable = null;
    }
  }

  private static void free(ArrayHandle handle) {
    KVStoreLib.KVArrayFree(handle); // throws (KVBusyException) before anything is freed
    handle.delete();
  }

  /** Wraps a handle the caller owns; this object frees it. */
  static NDArray adopt(ArrayHandle handle) {
    try {
      return new NDArray(handle, true);
    } catch (RuntimeException e) {
      KVStoreLib.KVArrayFree(handle);
      throw e;
    }
  }

  /** Wraps a borrowed handle (updater arguments); {@link #invalidate()} ends the loan. */
  static NDArray borrow(ArrayHandle handle) {
    return new NDArray(handle, false);
  }

  /** Ends the loan of a borrowed array; waits for calls another thread still runs on it. */
  void invalidate() {
    life.revoke();
  }

  /** One native call on up to three arrays' handles (unused ones are null). */
  @FunctionalInterface
  private interface NativeCall {
    void run(ArrayHandle a, ArrayHandle b, ArrayHandle c);
  }

  /**
   * Runs one native call on arrays a, b and c (b and c may be null; one array may be given
   * twice). Each is entered for the call and fenced until it returned; see the class comment.
   * This is the only place NDArray makes a native call on an array it wraps.
   */
  private static void call(NDArray a, NDArray b, NDArray c, NativeCall body) {
    ArrayHandle ha = a.life.enter();
    try {
      ArrayHandle hb = b == null ? null : b.life.enter();
      try {
        ArrayHandle hc = c == null ? null : c.life.enter();
        try {
          body.run(ha, hb, hc);
        } finally {
          if (c != null) c.life.exit();
        }
      } finally {
        if (b != null) b.life.exit();
      }
    } finally {
      a.life.exit();
      Reference.reachabilityFence(a);
      Reference.reachabilityFence(b);
      Reference.reachabilityFence(c);
    }
  }

  // ------------------------------------------------------------------------------------------
  // Creation

  /** A zero-filled array. */
  public static NDArray zeros(Shape shape, DType dtype, Context ctx) {
    if (shape == null || dtype == null || ctx == null) {
      throw new KVNullPointerException("zeros: shape, dtype and context must not be null");
    }
    ArrayHandle[] out = new ArrayHandle[1];
    KVStoreLib.KVArrayCreate(shape.dimsNoCopy(), dtype.code(), ctx.deviceType(), ctx.deviceId(), out);
    return adopt(out[0]);
  }

  /** A zero-filled float32 array on cpu(0). */
  public static NDArray zeros(Shape shape) {
    return zeros(shape, DType.FLOAT32, Context.cpu());
  }

  /** A zero-filled float32 array on ctx. */
  public static NDArray zeros(Shape shape, Context ctx) {
    return zeros(shape, DType.FLOAT32, ctx);
  }

  /** A zero-filled array on cpu(0). */
  public static NDArray zeros(Shape shape, DType dtype) {
    return zeros(shape, dtype, Context.cpu());
  }

  /** An array filled with {@code value}. */
  public static NDArray full(Shape shape, double value, DType dtype, Context ctx) {
    return created(shape, dtype, ctx, a -> a.fill(value));
  }

  /** A new zero-filled array that {@code init} then writes; closed again if init fails. */
  private static NDArray created(Shape shape, DType dtype, Context ctx, Consumer<NDArray> init) {
    NDArray a = zeros(shape, dtype, ctx);
    try {
      init.accept(a);
    } catch (RuntimeException e) {
      a.close();
      throw e;
    }
    return a;
  }

  /** An array of ones. */
  public static NDArray ones(Shape shape, DType dtype, Context ctx) {
    return full(shape, 1.0, dtype, ctx);
  }

  /** A float32 array of ones on cpu(0). */
  public static NDArray ones(Shape shape) {
    return ones(shape, DType.FLOAT32, Context.cpu());
  }

  /** A float32 array of ones on ctx. */
  public static NDArray ones(Shape shape, Context ctx) {
    return ones(shape, DType.FLOAT32, ctx);
  }

  /** An array of ones on cpu(0). */
  public static NDArray ones(Shape shape, DType dtype) {
    return ones(shape, dtype, Context.cpu());
  }

  private static NDArray fromHost(Object data, int length, Shape shape, DType dtype, Context ctx) {
    if (shape.size() != length) {
      throw new KVInvalidArgumentException(
          "data has " + length + " elements but shape " + shape + " needs " + shape.size());
    }
    return created(shape, dtype, ctx,
        a -> call(a, null, null, (h, u, v) -> KVStoreLib.KVArrayCopyFromHost(h, data)));
  }

  /** A float32 array holding {@code data} (row-major) with the given shape. */
  public static NDArray create(float[] data, Shape shape, Context ctx) {
    return fromHost(data, data.length, shape, DType.FLOAT32, ctx);
  }

  /** A float32 array on cpu(0). */
  public static NDArray create(float[] data, Shape shape) {
    return create(data, shape, Context.cpu());
  }

  /** A float64 array. */
  public static NDArray create(double[] data, Shape shape, Context ctx) {
    return fromHost(data, data.length, shape, DType.FLOAT64, ctx);
  }

  /** An int32 array. */
  public static NDArray create(int[] data, Shape shape, Context ctx) {
    return fromHost(data, data.length, shape, DType.INT32, ctx);
  }

  /** An int64 array. */
  public static NDArray create(long[] data, Shape shape, Context ctx) {
    return fromHost(data, data.length, shape, DType.INT64, ctx);
  }

  /** A uint8 array (bytes are taken as unsigned). */
  public static NDArray create(byte[] data, Shape shape, Context ctx) {
    return fromHost(data, data.length, shape, DType.UINT8, ctx);
  }

  /** A float16 array from IEEE binary16 bit patterns. */
  public static NDArray createFloat16(short[] bits, Shape shape, Context ctx) {
    return fromHost(bits, bits.length, shape, DType.FLOAT16, ctx);
  }

  // ------------------------------------------------------------------------------------------
  // Properties

  /**
   * The native handle (for the org.kvstore.swig layer); throws if closed. A raw call made with
   * it is not counted as in use: keep this NDArray open and reachable until it returned.
   */
  public ArrayHandle handle() {
    return life.peek();
  }

  public Shape shape() {
    return shape;
  }

  public DType dtype() {
    return dtype;
  }

  public Context context() {
    return context;
  }

  /** Number of elements. */
  public long size() {
    return shape.size();
  }

  /** Size in bytes: of every element, or of the data block of a row_sparse array. */
  public long nbytes() {
    if (stype == StorageType.ROW_SPARSE) {
      long[] out = new long[1];
      call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayGetNBytes(h, out));
      return out[0];
    }
    return shape.size() * dtype.size();
  }

  /** True once closed (or, for a borrowed array, once its updater call returned). */
  public boolean isClosed() {
    return life.isClosed();
  }
  /**
   * Frees the native array now (or, while a view of it is reachable, once none is); later calls
   * do nothing. A borrowed array is not freed, only no longer usable. Throws
   * {@link KVBusyException}, leaving the array open and usable, while a call that was given it
   * runs on another thread (a push of it that an updater keeps running, say).
   */
  @Override
  public void close() {
    if (life.close() && cleanable != null) cleanable.clean(); // the Cleaner's run is a no-op now
  }


  // ------------------------------------------------------------------------------------------
  // Host data

  private void expect(DType want, String javaType) {
    if (dtype != want) {
      throw new KVDtypeMismatchException(
          javaType + " data needs a " + want + " array, but this array is " + dtype);
    }
  }

  private void expectLength(int length) {
    if (length != shape.size()) {
      throw new KVInvalidArgumentException(
          "data has " + length + " elements but the array " + shape + " has " + shape.size());
    }
  }

  /**
   * The contents, copied into a new Java array of the host type of {@code want}; the logical
   * (dense) contents of a row_sparse array.
   */
  private <T> T copyOut(DType want, String javaType, IntFunction<T> alloc) {
    expect(want, javaType);
    if (stype == StorageType.ROW_SPARSE) {
      try (NDArray dense = toDense()) {
        return dense.copyOut(want, javaType, alloc);
      }
    }
    T r = alloc.apply(Math.toIntExact(size()));
    call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayCopyToHost(h, r));
    return r;
  }

  /** Overwrites the contents from {@code data}, a Java array of {@code length} elements. */
  private NDArray copyIn(DType want, String javaType, Object data, int length) {
    denseOnly("copyFrom");
    expect(want, javaType);
    expectLength(length);
    call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayCopyFromHost(h, data));
    return this;
  }

  /** Copies float32 contents into a new float[]. */
  public float[] toFloatArray() {
    return copyOut(DType.FLOAT32, "float[]", float[]::new);
  }

  /** Copies float64 contents into a new double[]. */
  public double[] toDoubleArray() {
    return copyOut(DType.FLOAT64, "double[]", double[]::new);
  }

  /** Copies int32 contents into a new int[]. */
  public int[] toIntArray() {
    return copyOut(DType.INT32, "int[]", int[]::new);
  }

  /** Copies int64 contents into a new long[]. */
  public long[] toLongArray() {
    return copyOut(DType.INT64, "long[]", long[]::new);
  }

  /** Copies uint8 contents into a new byte[] (read them with Byte.toUnsignedInt). */
  public byte[] toByteArray() {
    return copyOut(DType.UINT8, "byte[]", byte[]::new);
  }

  /** Copies float16 contents as IEEE binary16 bit patterns (see {@link Float16}). */
  public short[] toFloat16Bits() {
    return copyOut(DType.FLOAT16, "short[] (float16 bits)", short[]::new);
  }

  /** Overwrites the contents from a float[] (float32 arrays). */
  public NDArray copyFrom(float[] data) {
    return copyIn(DType.FLOAT32, "float[]", data, data.length);
  }

  /** Overwrites the contents from a double[] (float64 arrays). */
  public NDArray copyFrom(double[] data) {
    return copyIn(DType.FLOAT64, "double[]", data, data.length);
  }

  /** Overwrites the contents from an int[] (int32 arrays). */
  public NDArray copyFrom(int[] data) {
    return copyIn(DType.INT32, "int[]", data, data.length);
  }

  /** Overwrites the contents from a long[] (int64 arrays). */
  public NDArray copyFrom(long[] data) {
    return copyIn(DType.INT64, "long[]", data, data.length);
  }

  /** Overwrites the contents from a byte[] (uint8 arrays). */
  public NDArray copyFrom(byte[] data) {
    return copyIn(DType.UINT8, "byte[]", data, data.length);
  }

  /** Overwrites the contents from float16 bit patterns. */
  public NDArray copyFromFloat16Bits(short[] bits) {
    return copyIn(DType.FLOAT16, "short[] (float16 bits)", bits, bits.length);
  }

  /**
   * Overwrites the contents with the raw bytes of a direct buffer (its remaining elements, in
   * native byte order), which must be exactly {@link #nbytes()} long. No intermediate copy.
   */
  public NDArray copyFrom(Buffer direct) {
    denseOnly("copyFrom(Buffer)");
    requireDirect(direct);
    call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayCopyFromHost(h, direct));
    return this;
  }

  /** Copies the raw bytes into a direct buffer's remaining space (exactly nbytes()). */
  public void copyTo(Buffer direct) {
    denseOnly("copyTo(Buffer)");
    requireDirect(direct);
    call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayCopyToHost(h, direct));
  }

  private static void requireDirect(Buffer b) {
    if (b == null) throw new KVNullPointerException("buffer is null");
    if (!b.isDirect()) {
      throw new KVInvalidArgumentException(
          "a heap buffer was given; use a direct buffer (ByteBuffer.allocateDirect)");
    }
  }

  /**
   * A zero-copy view of a CPU array's memory, in native byte order. Writes go straight into
   * the array. The view keeps the memory alive: after {@link #close()}, or once this NDArray is
   * unreachable, the native array is freed only when the view and every buffer derived from it
   * ({@code asFloatBuffer()}, {@code slice()}, {@code duplicate()}, ...) are unreachable too.
   * An updater's borrowed arguments have no view (the store owns their memory): this throws
   * IllegalStateException for them.
   */
  public ByteBuffer asByteBuffer() {
    denseOnly("asByteBuffer");
    if (cleanable == null) {
      throw new IllegalStateException("a borrowed updater argument has no zero-copy view (the"
          + " store owns its memory); copy it out with toFloatArray() or copyTo(Buffer)");
    }
    ByteBuffer[] view = new ByteBuffer[1];
    call(this, null, null, (h, u, v) -> {
      // Derived buffers hold the JNI buffer as their attachment, so the Cleaner of this one
      // runs only once no buffer over the memory is reachable.
      view[0] = KVStoreLib.KVArrayGetDataBuffer(h);
      life.addView();
      CLEANER.register(view[0], life::dropView);
    });
    return view[0].order(ByteOrder.nativeOrder());
  }

  /** A zero-copy float view of a float32 CPU array (see {@link #asByteBuffer()}). */
  public FloatBuffer asFloatBuffer() {
    expect(DType.FLOAT32, "FloatBuffer");
    return asByteBuffer().asFloatBuffer();
  }

  // ------------------------------------------------------------------------------------------
  // Rows along the first axis. The C ABI has no views, so a row read is a copy and a row write
  // goes through host memory: an owned CPU array's zero-copy view, else (a GPU array, an
  // updater's borrowed argument) a host copy of the whole array, written back.

  /** A copy of row {@code i} (negative counts from the end): shape {@code shape[1:]}, same dtype and context. */
  public NDArray row(long i) {
    long r = rowIndex(i);
    return copyRows(r, r + 1, rowShape());
  }

  /**
   * A copy of rows {@code [begin, end)} (negative bounds count from the end; both are clipped to
   * the array, as a Python slice): shape {@code [rows, shape[1:]...]}, same dtype and context.
   */
  public NDArray rows(long begin, long end) {
    long n = firstDim();
    long b = clip(begin, n);
    long e = Math.max(b, clip(end, n));
    long[] dims = shape.toArray();
    dims[0] = e - b;
    return copyRows(b, e, Shape.of(dims));
  }

  /** Writes {@code value} (shape {@code shape[1:]}, this dtype, any context) into row {@code i}. */
  public NDArray setRow(long i, NDArray value) {
    if (value == null) throw new KVNullPointerException("setRow: value is null");
    long r = rowIndex(i);
    Shape rowShape = rowShape();
    if (!value.shape().equals(rowShape)) {
      throw new KVShapeMismatchException("setRow: a row of " + shape + " has shape " + rowShape
          + ", the value has shape " + value.shape());
    }
    if (value.dtype() != dtype) {
      throw new KVDtypeMismatchException("setRow: the array is " + dtype + ", the value " + value.dtype());
    }
    ByteBuffer bytes = ByteBuffer.allocateDirect((int) value.nbytes()).order(ByteOrder.nativeOrder());
    if (bytes.capacity() > 0) value.copyTo(bytes);
    writeRows(r, bytes);
    return this;
  }

  /** Sets every element of row {@code i} to {@code value} (converted as {@link #fill}). */
  public NDArray setRow(long i, double value) {
    long r = rowIndex(i);
    try (NDArray tmp = full(rowShape(), value, dtype, Context.cpu())) {
      return setRow(r, tmp);
    }
  }

  private long firstDim() {
    denseOnly("row indexing");
    if (shape.ndim() == 0) throw new IndexOutOfBoundsException("a 0-d NDArray has no rows");
    return shape.get(0);
  }

  private long rowIndex(long i) {
    long n = firstDim();
    if (i < -n || i >= n) {
      throw new IndexOutOfBoundsException("row " + i + " is out of range for axis 0 of size " + n);
    }
    return i < 0 ? i + n : i;
  }

  private static long clip(long i, long n) {
    if (i < 0) i += n;
    return Math.max(0, Math.min(n, i));
  }

  private long rowBytes() {
    return shape.get(0) == 0 ? 0 : nbytes() / shape.get(0);
  }

  private boolean hasHostView() {
    return cleanable != null && !context.isGpu();
  }

  /** The bytes of rows [b, e) as a direct buffer (a view of this array's memory or a copy). */
  private ByteBuffer hostRows(long b, long e) {
    ByteBuffer all;
    if (hasHostView()) {
      all = asByteBuffer();
    } else {
      all = ByteBuffer.allocateDirect((int) nbytes()).order(ByteOrder.nativeOrder());
      copyTo(all);
    }
    all.position((int) (b * rowBytes())).limit((int) (e * rowBytes()));
    return all.slice().order(ByteOrder.nativeOrder());
  }

  private void writeRows(long r, ByteBuffer bytes) {
    long off = r * rowBytes();
    if (hasHostView()) {
      ByteBuffer view = asByteBuffer();
      view.position((int) off);
      view.put(bytes);
      return;
    }
    ByteBuffer all = ByteBuffer.allocateDirect((int) nbytes()).order(ByteOrder.nativeOrder());
    copyTo(all);
    all.position((int) off);
    all.put(bytes);
    all.clear();
    copyFrom(all);
  }

  private Shape rowShape() {
    firstDim();
    long[] dims = shape.toArray();
    return Shape.of(Arrays.copyOfRange(dims, 1, dims.length));
  }

  private NDArray copyRows(long b, long e, Shape outShape) {
    NDArray out = zeros(outShape, dtype, context);
    try {
      if (e > b && rowBytes() > 0) out.copyFrom(hostRows(b, e));
      return out;
    } catch (RuntimeException ex) {
      out.close();
      throw ex;
    }
  }

  // ------------------------------------------------------------------------------------------
  // Row-sparse storage. A row_sparse array of shape (R, d1, ..., dk) stores the ids of some
  // rows (increasing, in [0, R)) and a dense block of those rows, shape (n, d1, ..., dk); every
  // other row reads as zero. It lives in host memory. shape(), dtype(), context() and size()
  // are the logical array's, nbytes() the block's, and the toXArray() copies give the logical
  // (dense) contents. Arithmetic, fill, copyTo(NDArray|Context), row indexing, copyFrom and the
  // buffer copies and views are dense operations: on a row_sparse array they throw
  // KVNotSupportedException (cast with toDense() first). Its row set changes only when
  // KVStore.rowSparsePull writes into it, so indices() and data() are copies of the moment.

  /** The storage type, fixed when the array is created. */
  public StorageType stype() {
    return stype;
  }

  /** Whether {@link #stype()} is ROW_SPARSE. */
  public boolean isRowSparse() {
    return stype == StorageType.ROW_SPARSE;
  }

  private void denseOnly(String what) {
    if (stype == StorageType.ROW_SPARSE) {
      throw new KVNotSupportedException(what + " is a dense operation and " + this
          + " is row_sparse; cast it with toDense() first");
    }
  }

  /**
   * A row_sparse array of logical shape {@code shape} with no stored rows (every row reads as
   * zero): an output for {@link KVStore#rowSparsePull}. ctx must be a CPU context.
   */
  public static NDArray rowSparseZeros(Shape shape, DType dtype, Context ctx) {
    if (shape == null || dtype == null || ctx == null) {
      throw new KVNullPointerException("rowSparseZeros: shape, dtype and context must not be null");
    }
    ArrayHandle[] out = new ArrayHandle[1];
    KVStoreLib.KVArrayCreateRowSparse(shape.dimsNoCopy(), dtype.code(), ctx.deviceType(),
        ctx.deviceId(), null, out);
    return adopt(out[0]);
  }

  /**
   * A row_sparse array of logical shape {@code shape} whose row {@code rowIds[i]} is row i of
   * the dense {@code data} (shape {@code [rowIds.length, shape[1:]...]}), as the reference's
   * {@code row_sparse_array((data, indices), shape)}. The ids may come in any order (each row
   * moves with its id) but not repeat, and lie in [0, shape[0]). Dtype and context are data's
   * (a CPU context). Everything is checked before the array is made.
   */
  public static NDArray rowSparse(NDArray data, long[] rowIds, Shape shape) {
    if (data == null || rowIds == null || shape == null) {
      throw new KVNullPointerException("rowSparse: data, rowIds and shape must not be null");
    }
    data.denseOnly("rowSparse(data, ...)");
    Shape ds = data.shape();
    if (ds.ndim() == 0 || ds.get(0) != rowIds.length) {
      throw new KVInvalidArgumentException("rowSparse: data " + ds + " must hold one row per id ("
          + rowIds.length + " ids)");
    }
    long[] rowDims = Arrays.copyOfRange(ds.toArray(), 1, ds.ndim());
    if (shape.ndim() != ds.ndim()
        || !Arrays.equals(rowDims, Arrays.copyOfRange(shape.toArray(), 1, shape.ndim()))) {
      throw new KVShapeMismatchException("rowSparse: rows of data " + ds + " do not fit shape " + shape);
    }
    Integer[] order = new Integer[rowIds.length];
    for (int i = 0; i < order.length; ++i) order[i] = i;
    Arrays.sort(order, (x, y) -> Long.compare(rowIds[x], rowIds[y]));
    long[] ids = new long[rowIds.length];
    for (int i = 0; i < ids.length; ++i) {
      ids[i] = rowIds[order[i]];
      if (i > 0 && ids[i] == ids[i - 1]) {
        throw new KVInvalidArgumentException("rowSparse: row id " + ids[i] + " appears more than once");
      }
    }
    NDArray out = adoptRowSparse(shape, data.dtype(), data.context(), ids);
    try {
      int rowBytes = rowIds.length == 0 ? 0 : Math.toIntExact(data.nbytes() / rowIds.length);
      if (rowBytes > 0) {
        ByteBuffer src = ByteBuffer.allocateDirect(Math.toIntExact(data.nbytes()));
        data.copyTo(src);
        ByteBuffer block = ByteBuffer.allocateDirect(src.capacity());
        for (int i = 0; i < order.length; ++i) {
          src.limit((order[i] + 1) * rowBytes).position(order[i] * rowBytes);
          block.put(src);
        }
        block.flip();
        call(out, null, null, (h, u, v) -> KVStoreLib.KVArrayCopyFromHost(h, block));
      }
      return out;
    } catch (RuntimeException e) {
      out.close();
      throw e;
    }
  }

  /** A row_sparse float32 array of rowIds.length rows given row-major in {@code data}. */
  public static NDArray rowSparse(float[] data, long[] rowIds, Shape shape, Context ctx) {
    if (data == null || rowIds == null || shape == null) {
      throw new KVNullPointerException("rowSparse: data, rowIds and shape must not be null");
    }
    long[] dims = shape.toArray();
    if (dims.length == 0) throw new KVInvalidArgumentException("rowSparse: a row_sparse array needs a dimension");
    dims[0] = rowIds.length;
    try (NDArray rows = create(data, Shape.of(dims), ctx)) {
      return rowSparse(rows, rowIds, shape);
    }
  }

  private static NDArray adoptRowSparse(Shape shape, DType dtype, Context ctx, long[] ids) {
    ArrayHandle[] out = new ArrayHandle[1];
    KVStoreLib.KVArrayCreateRowSparse(shape.dimsNoCopy(), dtype.code(), ctx.deviceType(),
        ctx.deviceId(), ids, out);
    return adopt(out[0]);
  }

  /**
   * A new array of storage type {@code stype} with this array's contents (the reference's
   * cast_storage): dense to row_sparse keeps the rows that have a non-zero element,
   * row_sparse to dense gives zero rows where nothing is stored, and the same type copies.
   */
  public NDArray tostype(StorageType stype) {
    if (stype == null) throw new KVNullPointerException("tostype: storage type is null");
    ArrayHandle[] out = new ArrayHandle[1];
    call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayCastStorage(h, stype.code(), out));
    return adopt(out[0]);
  }

  /** {@link #tostype(StorageType)} by name: "default" or "row_sparse". */
  public NDArray tostype(String stype) {
    return tostype(StorageType.fromName(stype));
  }

  /** A dense copy (for a row_sparse array: zero rows where nothing is stored). */
  public NDArray toDense() {
    return tostype(StorageType.DEFAULT);
  }

  /** The number of stored rows of a row_sparse array (KVInvalidArgumentException if dense). */
  public long numRows() {
    long[] out = new long[1];
    call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayGetNumRows(h, out));
    return out[0];
  }

  /** The stored row ids of a row_sparse array, increasing (KVInvalidArgumentException if dense). */
  public long[] indices() {
    long[] ids = new long[Math.toIntExact(numRows())];
    call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayGetRowIds(h, ids));
    return ids;
  }

  /**
   * The stored rows of a row_sparse array as a new dense array of shape
   * {@code [numRows(), shape[1:]...]}, row i holding row {@code indices()[i]}
   * (KVInvalidArgumentException if dense).
   */
  public NDArray data() {
    long[] dims = shape.toArray();
    dims[0] = numRows();
    NDArray out = zeros(Shape.of(dims), dtype, context);
    try {
      if (out.nbytes() > 0) {
        ByteBuffer block = ByteBuffer.allocateDirect(Math.toIntExact(out.nbytes()));
        call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayCopyToHost(h, block));
        out.copyFrom(block);
      }
      return out;
    } catch (RuntimeException e) {
      out.close();
      throw e;
    }
  }

  // ------------------------------------------------------------------------------------------
  // Copies and arithmetic

  /** Sets every element to {@code value}. */
  public NDArray fill(double value) {
    call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayFill(h, value));
    return this;
  }

  /** Copies this array into {@code dst} (same shape and dtype, any device). */
  public NDArray copyTo(NDArray dst) {
    if (dst == null) throw new KVNullPointerException("copyTo: destination is null");
    call(this, dst, null, (src, d, u) -> KVStoreLib.KVArrayCopy(d, src));
    return dst;
  }

  /** A copy on the given context. */
  public NDArray copyTo(Context ctx) {
    NDArray r = zeros(shape, dtype, ctx);
    try {
      return copyTo(r);
    } catch (RuntimeException e) {
      r.close();
      throw e;
    }
  }

  /** A copy on the same context (of the same storage type). */
  public NDArray copy() {
    return stype == StorageType.ROW_SPARSE ? tostype(StorageType.ROW_SPARSE) : copyTo(context);
  }

  /** Blocks until pending asynchronous writes (distributed pulls) have landed. */
  public NDArray waitToRead() {
    call(this, null, null, (h, u, v) -> KVStoreLib.KVArrayWaitToRead(h));
    return this;
  }

  private NDArray binary(int op, NDArray other) {
    if (other == null) throw new KVNullPointerException("operand is null");
    NDArray r = zeros(shape, dtype, context);
    try {
      call(this, other, r, (a, b, out) -> KVStoreLib.KVArrayBinary(op, a, b, out));
    } catch (RuntimeException e) {
      r.close();
      throw e;
    }
    return r;
  }

  private NDArray scalar(int op, double s) {
    NDArray r = zeros(shape, dtype, context);
    try {
      call(this, r, null, (a, out, u) -> KVStoreLib.KVArrayBinaryScalar(op, a, s, out));
    } catch (RuntimeException e) {
      r.close();
      throw e;
    }
    return r;
  }

  private NDArray binaryInPlace(int op, NDArray other) {
    if (other == null) throw new KVNullPointerException("operand is null");
    call(this, other, null, (a, b, u) -> KVStoreLib.KVArrayBinary(op, a, b, a));
    return this;
  }

  private NDArray scalarInPlace(int op, double s) {
    call(this, null, null, (a, u, v) -> KVStoreLib.KVArrayBinaryScalar(op, a, s, a));
    return this;
  }

  /** this + other, as a new array. */
  public NDArray add(NDArray other) {
    return binary(KVBinaryOp.KV_OP_ADD, other);
  }

  /** this - other, as a new array. */
  public NDArray sub(NDArray other) {
    return binary(KVBinaryOp.KV_OP_SUB, other);
  }

  /** this * other (element-wise), as a new array. */
  public NDArray mul(NDArray other) {
    return binary(KVBinaryOp.KV_OP_MUL, other);
  }

  /** this / other (element-wise), as a new array. */
  public NDArray div(NDArray other) {
    return binary(KVBinaryOp.KV_OP_DIV, other);
  }

  /** this + s, as a new array. */
  public NDArray add(double s) {
    return scalar(KVBinaryOp.KV_OP_ADD, s);
  }

  /** this - s, as a new array. */
  public NDArray sub(double s) {
    return scalar(KVBinaryOp.KV_OP_SUB, s);
  }

  /** this * s, as a new array. */
  public NDArray mul(double s) {
    return scalar(KVBinaryOp.KV_OP_MUL, s);
  }

  /** this / s, as a new array. */
  public NDArray div(double s) {
    return scalar(KVBinaryOp.KV_OP_DIV, s);
  }

  /** this += other; returns this. */
  public NDArray addInPlace(NDArray other) {
    return binaryInPlace(KVBinaryOp.KV_OP_ADD, other);
  }

  /** this -= other; returns this. */
  public NDArray subInPlace(NDArray other) {
    return binaryInPlace(KVBinaryOp.KV_OP_SUB, other);
  }

  /** this *= other; returns this. */
  public NDArray mulInPlace(NDArray other) {
    return binaryInPlace(KVBinaryOp.KV_OP_MUL, other);
  }

  /** this /= other; returns this. */
  public NDArray divInPlace(NDArray other) {
    return binaryInPlace(KVBinaryOp.KV_OP_DIV, other);
  }

  /** this += s; returns this. */
  public NDArray addInPlace(double s) {
    return scalarInPlace(KVBinaryOp.KV_OP_ADD, s);
  }

  /** this -= s; returns this. */
  public NDArray subInPlace(double s) {
    return scalarInPlace(KVBinaryOp.KV_OP_SUB, s);
  }

  /** this *= s; returns this. */
  public NDArray mulInPlace(double s) {
    return scalarInPlace(KVBinaryOp.KV_OP_MUL, s);
  }

  /** this /= s; returns this. */
  public NDArray divInPlace(double s) {
    return scalarInPlace(KVBinaryOp.KV_OP_DIV, s);
  }

  @Override
  public String toString() {
    return "NDArray" + shape + " " + dtype + (stype == StorageType.ROW_SPARSE ? " row_sparse" : "")
        + " @" + context + (isClosed() ? " (closed)" : "");
  }
}
