package org.kvstore.scalaapi

import org.kvstore.{DType, Float16}
import org.kvstore.{NDArray => JNDArray}

/**
 * An n-dimensional array (a facade over org.kvstore.NDArray). Arithmetic returns new arrays
 * (`a * 2`, `a + b`); `+=` and friends work in place. `dispose()` frees it now; an array that
 * is never disposed is freed once unreachable.
 *
 * Storage is dense, or row_sparse (`stype`; made by `NDArray.rowSparseArray`,
 * `NDArray.rowSparseZeros` or `tostype("row_sparse")`): the ids of some rows and a dense block
 * of those rows, every other row zero. `toArray` gives a row_sparse array's logical contents;
 * arithmetic, `set`, rows and `copyTo` are dense operations and throw
 * org.kvstore.KVNotSupportedException on it (cast with `toDense` first).
 */
final class NDArray private[scalaapi] (val java: JNDArray) extends AutoCloseable {
  def shape: Shape = Shape.fromJava(java.shape)

  def context: Context = new Context(java.context)

  def dtype: DType = java.dtype

  def size: Int = Math.toIntExact(java.size)

  /** The elements as floats (float32 directly; other dtypes converted). */
  def toArray: Array[Float] = java.dtype match {
    case DType.FLOAT32 => java.toFloatArray
    case DType.FLOAT64 => java.toDoubleArray.map(_.toFloat)
    case DType.INT32 => java.toIntArray.map(_.toFloat)
    case DType.INT64 => java.toLongArray.map(_.toFloat)
    case DType.UINT8 => java.toByteArray.map(b => (b & 0xff).toFloat)
    case DType.FLOAT16 => Float16.toFloats(java.toFloat16Bits)
  }

  /** The first element, for scalars. */
  def toScalar: Float = toArray(0)

  def +(other: NDArray): NDArray = new NDArray(java.add(other.java))
  def -(other: NDArray): NDArray = new NDArray(java.sub(other.java))
  def *(other: NDArray): NDArray = new NDArray(java.mul(other.java))
  def /(other: NDArray): NDArray = new NDArray(java.div(other.java))
  def +(s: Float): NDArray = new NDArray(java.add(s.toDouble))
  def -(s: Float): NDArray = new NDArray(java.sub(s.toDouble))
  def *(s: Float): NDArray = new NDArray(java.mul(s.toDouble))
  def /(s: Float): NDArray = new NDArray(java.div(s.toDouble))

  def +=(other: NDArray): NDArray = { java.addInPlace(other.java); this }
  def -=(other: NDArray): NDArray = { java.subInPlace(other.java); this }
  def *=(other: NDArray): NDArray = { java.mulInPlace(other.java); this }
  def /=(other: NDArray): NDArray = { java.divInPlace(other.java); this }
  def +=(s: Float): NDArray = { java.addInPlace(s.toDouble); this }
  def -=(s: Float): NDArray = { java.subInPlace(s.toDouble); this }
  def *=(s: Float): NDArray = { java.mulInPlace(s.toDouble); this }
  def /=(s: Float): NDArray = { java.divInPlace(s.toDouble); this }

  /** Sets every element to `value`. */
  def set(value: Float): NDArray = { java.fill(value.toDouble); this }

  /** Overwrites a float32 array from `data` (row-major). */
  def set(data: Array[Float]): NDArray = { java.copyFrom(data); this }

  /** Copies into `other` (same shape and dtype, any device). */
  /** A copy of row `i` (negative from the end); the C ABI has no views, so rows are copies. */
  def at(i: Int): NDArray = new NDArray(java.row(i))

  def apply(i: Int): NDArray = at(i)

  /** A copy of rows `[begin, end)`. */
  def slice(begin: Int, end: Int): NDArray = new NDArray(java.rows(begin, end))

  /** Writes `value` (shape `shape.drop(1)`) into row `i`: `a(i) = b`. */
  def update(i: Int, value: NDArray): Unit = java.setRow(i, value.java)

  /** Sets every element of row `i`: `a(i) = 5f`. */
  def update(i: Int, value: Float): Unit = java.setRow(i, value.toDouble)

  def copyTo(other: NDArray): NDArray = { java.copyTo(other.java); other }

  /** A copy on `ctx`. */
  def copyTo(ctx: Context): NDArray = new NDArray(java.copyTo(ctx.java))

  def copy(): NDArray = new NDArray(java.copy())

  def waitToRead(): Unit = java.waitToRead()

  // Row-sparse storage (see the class comment).

  /** The storage type: "default" or "row_sparse" (the reference's stype names). */
  def stype: String = java.stype.toString

  def isRowSparse: Boolean = java.isRowSparse

  /** A new array of storage type "default" or "row_sparse" with these contents (cast_storage:
   *  dense to row_sparse keeps the rows that have a non-zero element). */
  def tostype(stype: String): NDArray = new NDArray(java.tostype(stype))

  /** A dense copy (zero rows where a row_sparse array stores nothing). */
  def toDense: NDArray = new NDArray(java.toDense)

  /** The number of stored rows of a row_sparse array. */
  def numRows: Long = java.numRows

  /** The stored row ids of a row_sparse array, increasing. */
  def indices: Array[Long] = java.indices

  /** The stored rows of a row_sparse array: a new dense array of shape (numRows, shape[1:]). */
  def data: NDArray = new NDArray(java.data)

  def isDisposed: Boolean = java.isClosed

  /** Frees the native array now. */
  def dispose(): Unit = java.close()

  override def close(): Unit = java.close()

  override def toString: String = java.toString
}

object NDArray {
  /** A zero-filled array (float32 on cpu(0) unless told). */
  def zeros(shape: Shape, ctx: Context = Context.defaultCtx, dtype: DType = DType.FLOAT32): NDArray =
    new NDArray(JNDArray.zeros(shape.toJava, dtype, ctx.java))

  /** An array of ones. */
  def ones(shape: Shape, ctx: Context = Context.defaultCtx, dtype: DType = DType.FLOAT32): NDArray =
    new NDArray(JNDArray.ones(shape.toJava, dtype, ctx.java))

  /** An array filled with `value`. */
  def full(shape: Shape, value: Float, ctx: Context = Context.defaultCtx,
           dtype: DType = DType.FLOAT32): NDArray =
    new NDArray(JNDArray.full(shape.toJava, value.toDouble, dtype, ctx.java))

  /** A float32 array holding `data` (row-major). */
  def array(data: Array[Float], shape: Shape, ctx: Context = Context.defaultCtx): NDArray =
    new NDArray(JNDArray.create(data, shape.toJava, ctx.java))

  /** A row_sparse array of logical shape `shape` whose row `indices(i)` is row i of the dense
   *  `data` (ids in any order, no repeats; rows move with their ids); dtype and context are
   *  data's. */
  def rowSparseArray(data: NDArray, indices: Array[Long], shape: Shape): NDArray =
    new NDArray(JNDArray.rowSparse(data.java, indices, shape.toJava))

  /** A float32 row_sparse array of `indices.length` rows given row-major in `data`. */
  def rowSparseArray(data: Array[Float], indices: Array[Long], shape: Shape,
                     ctx: Context = Context.defaultCtx): NDArray =
    new NDArray(JNDArray.rowSparse(data, indices, shape.toJava, ctx.java))

  /** A row_sparse array with no stored rows: an output for `KVStore.rowSparsePull`. */
  def rowSparseZeros(shape: Shape, ctx: Context = Context.defaultCtx,
                     dtype: DType = DType.FLOAT32): NDArray =
    new NDArray(JNDArray.rowSparseZeros(shape.toJava, dtype, ctx.java))

  /** Wraps a Java array (shares it). */
  def fromJava(a: JNDArray): NDArray = new NDArray(a)
}
