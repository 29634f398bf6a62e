(ns org.kvstore.clojure.ndarray
  "N-dimensional arrays: (ones [2 3]), (zeros [2 3] {:ctx (context/cpu 1) :dtype :float64}),
  (* a 2), (+ a b), (->vec a). Arithmetic returns new arrays; add!, sub!, mul!, div! (also +=,
  -=, *=) work in place, e.g. inside an updater. An array is freed by dispose, or once it is
  unreachable."
  (:refer-clojure :exclude [* + - / shape])
  (:require [org.kvstore.clojure.context :as context]
            [org.kvstore.clojure.errors :refer [with-errors fail]])
  (:import (org.kvstore NDArray Shape DType Context Float16 StorageType)))

(def ^:private dtypes
  "Keyword -> DType, from Java's DType (whose names come from the library)."
  (into {} (map (fn [^DType t] [(keyword (str t)) t])) (DType/values)))

(defn- ->dtype ^DType [d]
  (cond (nil? d) DType/FLOAT32
        (instance? DType d) d
        (keyword? d) (or (dtypes d) (fail (str "unknown dtype " d " (valid: " (keys dtypes) ")") {:dtype d}))
        (string? d) (with-errors (DType/fromName d))
        :else (fail (str "unknown dtype " (pr-str d)) {:dtype d})))

(defn- ->shape ^Shape [s]
  (cond (instance? Shape s) s
        (and (sequential? s) (every? integer? s))
        (with-errors (Shape/of (long-array s)))
        :else (fail (str "a shape is a vector of integers, got " (pr-str s)) {:shape s})))

(defn- opts->ctx ^Context [opts]
  (or (:ctx opts) context/default-context))

(defn zeros
  "A zero-filled array. opts: {:ctx context, :dtype :float32|:float64|:float16|:uint8|:int32|:int64}."
  ([shape] (zeros shape {}))
  ([shape opts]
   (with-errors (NDArray/zeros (->shape shape) (->dtype (:dtype opts)) (opts->ctx opts)))))

(defn ones
  "An array of ones; opts as zeros."
  ([shape] (ones shape {}))
  ([shape opts]
   (with-errors (NDArray/ones (->shape shape) (->dtype (:dtype opts)) (opts->ctx opts)))))

(defn full
  "An array filled with value; opts as zeros."
  ([shape value] (full shape value {}))
  ([shape value opts]
   (with-errors (NDArray/full (->shape shape) (double value) (->dtype (:dtype opts)) (opts->ctx opts)))))

(defn array
  "A float32 array holding the numbers of coll (row-major) with the given shape."
  ([coll shape] (array coll shape {}))
  ([coll shape opts]
   (with-errors (NDArray/create (float-array coll) (->shape shape) (opts->ctx opts)))))

(defn shape
  "The shape as a vector of longs."
  [^NDArray a]
  (vec (.toArray (.shape a))))

(defn dtype [^NDArray a] (keyword (str (.dtype a))))

(defn context [^NDArray a] (.context a))

(defn size [^NDArray a] (.size a))

(defn ->vec
  "The elements as a vector (floats for float32/float16, doubles, longs for integer dtypes)."
  [^NDArray a]
  (with-errors
    (condp = (.dtype a)
      DType/FLOAT32 (vec (.toFloatArray a))
      DType/FLOAT64 (vec (.toDoubleArray a))
      DType/FLOAT16 (vec (Float16/toFloats (.toFloat16Bits a)))
      DType/INT32 (mapv long (.toIntArray a))
      DType/INT64 (vec (.toLongArray a))
      DType/UINT8 (mapv #(bit-and (long %) 0xff) (.toByteArray a)))))

(defn ->float-array
  "The elements of a float32 array as a float[]."
  [^NDArray a]
  (with-errors (.toFloatArray a)))

(defn set-values!
  "Overwrites a float32 array from the numbers of coll; returns a."
  [^NDArray a coll]
  (with-errors (.copyFrom a (float-array coll))))

(defn fill!
  "Sets every element to value; returns a."
  [^NDArray a value]
  (with-errors (.fill a (double value))))

(defn row
  "A copy of row i of a (negative i counts from the end), of shape (rest (shape a)). The C ABI
  has no views: rows are copies. An index out of range throws IndexOutOfBoundsException, as
  nth does."
  [^NDArray a i]
  (with-errors (.row a (long i))))

(defn rows
  "A copy of rows [begin, end) of a (negative bounds count from the end; clipped as a slice)."
  [^NDArray a begin end]
  (with-errors (.rows a (long begin) (long end))))

(defn set-row!
  "Writes value (a number, or an array of the row's shape and a's dtype) into row i of a;
  returns a. Checked before anything is written."
  [^NDArray a i value]
  (with-errors
    (if (instance? NDArray value)
      (.setRow a (long i) ^NDArray value)
      (.setRow a (long i) (double value)))))

(defn copy
  "A copy on the same context, of the same storage type."
  [^NDArray a]
  (with-errors (.copy a)))

(defn copy-to
  "Copies a into dst (an array) or onto a context; returns the destination."
  [^NDArray a dst]
  (with-errors
    (if (instance? Context dst) (.copyTo a ^Context dst) (.copyTo a ^NDArray dst))))

(defn dispose
  "Frees the array now. While a call that was given the array runs on another thread (a push
  of it, say) it raises ex-info with :name \"KV_ERR_BUSY\" instead and frees nothing."
  [^NDArray a]
  (with-errors (.close a)))

(defmacro ^:private defop [name doc array-method scalar-method]
  `(defn ~name ~doc
     ([a# b#]
      (with-errors
        (if (instance? NDArray b#)
          (~array-method ^NDArray a# ^NDArray b#)
          (~scalar-method ^NDArray a# (double b#)))))
     ([a# b# & more#]
      (reduce ~name (~name a# b#) more#))))

(defop + "a + b (b an array or a number), as a new array." .add .add)
(defop - "a - b, as a new array." .sub .sub)
(defop * "a * b (element-wise), as a new array." .mul .mul)
(defop / "a / b (element-wise), as a new array." .div .div)

(defmacro ^:private defop! [name doc array-method scalar-method]
  `(defn ~name ~doc [a# b#]
     (with-errors
       (if (instance? NDArray b#)
         (~array-method ^NDArray a# ^NDArray b#)
         (~scalar-method ^NDArray a# (double b#))))))

(defop! add! "a += b in place; returns a." .addInPlace .addInPlace)
(defop! sub! "a -= b in place; returns a." .subInPlace .subInPlace)
(defop! mul! "a *= b in place; returns a." .mulInPlace .mulInPlace)
(defop! div! "a /= b in place; returns a." .divInPlace .divInPlace)

(def += add!)
(def -= sub!)
(def *= mul!)

;; Row-sparse storage. A row-sparse array of shape [R d1 ... dk] stores the ids of some rows
;; (increasing, in [0, R)) and a dense block of those rows, [n d1 ... dk]; every other row
;; reads as zero. It lives in host memory. shape, dtype and size are the logical array's, and
;; ->vec gives its logical contents. Arithmetic, fill!, set-values!, rows and copy-to are dense
;; operations: on a row-sparse array they raise ex-info with :name "KV_ERR_NOT_SUPPORTED"
;; (cast with ->dense first). Only kvstore/row-sparse-pull changes an array's row set.

(defn- ->stype ^StorageType [t]
  (cond (instance? StorageType t) t
        (#{:row-sparse :row_sparse "row_sparse"} t) StorageType/ROW_SPARSE
        (#{:default "default"} t) StorageType/DEFAULT
        :else (fail (str "unknown storage type " (pr-str t) " (valid: :default, :row-sparse)") {:stype t})))

(defn stype
  "The storage type: :default or :row-sparse."
  [^NDArray a]
  (if (.isRowSparse a) :row-sparse :default))

(defn row-sparse-array
  "A row-sparse array of logical shape `shape` whose row (nth indices i) is row i of data, as
  the reference's row_sparse_array((data, indices), shape): data is an NDArray of
  [(count indices) d1 ... dk] or the numbers of those rows (row-major, float32); indices are
  integers in any order (each row moves with its id), without repeats. opts: {:ctx context}
  for numbers (an NDArray's own dtype and context are kept)."
  ([data indices shape] (row-sparse-array data indices shape {}))
  ([data indices shape opts]
   (when-not (and (sequential? indices) (every? integer? indices))
     (fail (str "indices must be a sequence of integers, got " (pr-str indices)) {:indices indices}))
   (with-errors
     (if (instance? NDArray data)
       (NDArray/rowSparse ^NDArray data (long-array indices) (->shape shape))
       (NDArray/rowSparse (float-array data) (long-array indices) (->shape shape) (opts->ctx opts))))))

(defn row-sparse-zeros
  "A row-sparse array with no stored rows (an output for kvstore/row-sparse-pull); opts as zeros."
  ([shape] (row-sparse-zeros shape {}))
  ([shape opts]
   (with-errors (NDArray/rowSparseZeros (->shape shape) (->dtype (:dtype opts)) (opts->ctx opts)))))

(defn tostype
  "A new array of storage type t (:default or :row-sparse) with a's contents (cast_storage:
  dense to row-sparse keeps the rows that have a non-zero element)."
  [^NDArray a t]
  (let [t (->stype t)]
    (with-errors (.tostype a t))))

(defn ->dense
  "A dense copy (zero rows where a row-sparse array stores nothing)."
  [^NDArray a]
  (with-errors (.toDense a)))

(defn num-rows
  "The number of stored rows of a row-sparse array."
  [^NDArray a]
  (with-errors (.numRows a)))

(defn indices
  "The stored row ids of a row-sparse array, increasing, as a vector of longs."
  [^NDArray a]
  (with-errors (vec (.indices a))))

(defn data
  "The stored rows of a row-sparse array: a new dense array of shape [(num-rows a) d1 ... dk]."
  [^NDArray a]
  (with-errors (.data a)))
