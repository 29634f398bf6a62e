(ns org.kvstore.clojure.kvstore
  "Key-value stores: (create \"local\"), (init kv [\"3\"] [a]), (push kv \"3\" a),
  (pull kv [\"3\" \"3\"] [a b]). Keys are strings or integers, one kind per store; a key and
  its value may be given alone or as vectors (a single key with several arrays repeats the
  key). Mutating functions return the store, so calls thread with ->. Failures raise ex-info
  with the library's message and {:code c :name n}; the store is left as it was."
  (:refer-clojure :exclude [type])
  (:require [clojure.string :as str]
            [org.kvstore.clojure.errors :refer [with-errors fail]])
  (:import (org.kvstore KVStore NDArray Updater StrUpdater)))

(defn create
  "Creates a store: \"local\" (default), \"device\", \"nccl\", \"dist_sync\", ..."
  ([] (create "local"))
  ([name] (with-errors (KVStore/create ^String name))))

(defn dispose
  "Releases the store now (its updater is released too). While a call on the store runs (on
  another thread, or the push whose updater calls dispose) it raises ex-info with :name
  \"KV_ERR_BUSY\" instead, frees nothing, and the store stays usable."
  [^KVStore kv]
  (with-errors (.close kv)))

(defn- key-list [ks]
  (if (sequential? ks) (vec ks) [ks]))

(defn- array-list [vs]
  (let [vs (if (sequential? vs) (vec vs) [vs])]
    (doseq [[i v] (map-indexed vector vs)]
      (when-not (instance? NDArray v)
        (fail (str "value " i " is not an NDArray: " (pr-str v)) {:index i})))
    (into-array NDArray vs)))

(defn- pair-up
  "Matches keys with arrays: one key for several arrays repeats the key."
  [ks vs]
  (let [ks (key-list ks)
        arrs (array-list vs)
        ks (if (and (= 1 (count ks)) (< 1 (count arrs))) (vec (repeat (count arrs) (first ks))) ks)]
    (when-not (= (count ks) (count arrs))
      (fail (str (count ks) " keys but " (count arrs) " arrays (the lists must have equal length)")
            {:keys ks}))
    [ks arrs]))

(defn- key-kind [ks]
  (cond (every? string? ks) :string
        (every? integer? ks) :int
        :else (fail (str "keys must be all strings or all integers, got " (pr-str ks)) {:keys ks})))

(defn- int-keys ^ints [ks]
  (int-array (map (fn [k]
                    (if (<= Integer/MIN_VALUE k Integer/MAX_VALUE)
                      k
                      (fail (str "key " k " does not fit in an int") {:key k})))
                  ks)))

(defn- str-keys [ks] (into-array String ks))

(defmacro ^:private with-key-array
  "Evaluates body with k bound to the keys ks as an int[] or a String[], by their kind, so that
  one interop form reaches both overloads of a KVStore method (without reflection)."
  [[k ks] & body]
  `(let [ks# ~ks]
     (case (key-kind ks#)
       :int (let [~(with-meta k {:tag 'ints}) (int-keys ks#)] ~@body)
       :string (let [~(with-meta k {:tag "[Ljava.lang.String;"}) (str-keys ks#)] ~@body))))

(defn init
  "Initialises keys with copies of the arrays."
  [^KVStore kv ks vs]
  (let [[ks ^"[Lorg.kvstore.NDArray;" arrs] (pair-up ks vs)]
    (with-errors (with-key-array [k ks] (.init kv k arrs)))
    kv))

(defn push
  "Pushes arrays to keys; the arrays of a repeated key are summed, then merged by the updater."
  ([kv ks vs] (push kv ks vs 0))
  ([^KVStore kv ks vs priority]
   (let [[ks ^"[Lorg.kvstore.NDArray;" arrs] (pair-up ks vs)]
     (with-errors (with-key-array [k ks] (.push kv k arrs (int priority))))
     kv)))

(defn pull
  "Copies the stored value of each key into its output array(s)."
  ([kv ks outs] (pull kv ks outs 0))
  ([^KVStore kv ks outs priority]
   (let [[ks ^"[Lorg.kvstore.NDArray;" arrs] (pair-up ks outs)]
     (with-errors (with-key-array [k ks] (.pull kv k arrs (int priority))))
     kv)))

(defn- row-ids-list
  "One row-ids array per output: an NDArray (or integers) for every output, or a sequence of
  arrays as long as outs."
  [row-ids n]
  (cond (instance? NDArray row-ids) (into-array NDArray (repeat n row-ids))
        (and (sequential? row-ids) (seq row-ids) (every? integer? row-ids))
        (let [ids (with-errors (NDArray/create (long-array row-ids)
                                               (org.kvstore.Shape/of (long-array [(count row-ids)]))
                                               (org.kvstore.Context/cpu)))]
          (into-array NDArray (repeat n ids)))
        :else (let [arrs (array-list row-ids)]
                (cond (= 1 (count arrs)) (into-array NDArray (repeat n (first arrs)))
                      (= n (count arrs)) arrs
                      :else (fail (str n " outputs but " (count arrs) " row-ids arrays") {})))))

(defn row-sparse-pull
  "Pulls rows: each output (a row-sparse array of the key's shape and dtype, e.g. from
  ndarray/row-sparse-zeros) then holds exactly the rows of its key's value named by row-ids,
  replacing what it held. row-ids: a dense NDArray of integral values (any order, repeats
  allowed) or a sequence of integers, serving every output, or one array per output. Keys and
  outputs pair up as in pull. A failure changes no output. Returns kv."
  ([kv ks outs row-ids] (row-sparse-pull kv ks outs row-ids 0))
  ([^KVStore kv ks outs row-ids priority]
   (let [[ks ^"[Lorg.kvstore.NDArray;" arrs] (pair-up ks outs)
         ^"[Lorg.kvstore.NDArray;" ids (row-ids-list row-ids (count arrs))]
     (with-errors (with-key-array [k ks] (.rowSparsePull kv k arrs ids (int priority))))
     kv)))

(defn push-pull
  "Pushes vs to ks, then pulls the merged values into outs, as one call."
  [^KVStore kv ks vs outs]
  (let [[ks arrs] (pair-up ks vs)
        [oks oarrs] (pair-up (distinct ks) outs)]
    (with-errors
      (case (key-kind ks)
        :int (.pushPull kv (int-keys ks) ^"[Lorg.kvstore.NDArray;" arrs (int-keys oks) ^"[Lorg.kvstore.NDArray;" oarrs 0)
        :string (.pushPull kv ^"[Ljava.lang.String;" (str-keys ks) ^"[Lorg.kvstore.NDArray;" arrs
                           ^"[Ljava.lang.String;" (str-keys oks) ^"[Lorg.kvstore.NDArray;" oarrs 0)))
    kv))

(defn broadcast
  "Initialises ks with vs, then pulls them into outs."
  [^KVStore kv ks vs outs]
  (let [[ks arrs] (pair-up ks vs)
        [oks oarrs] (pair-up ks outs)]
    (with-errors
      (case (key-kind ks)
        :int (.broadcast kv (int-keys ks) ^"[Lorg.kvstore.NDArray;" arrs (int-keys oks) ^"[Lorg.kvstore.NDArray;" oarrs 0)
        :string (.broadcast kv ^"[Ljava.lang.String;" (str-keys ks) ^"[Lorg.kvstore.NDArray;" arrs
                            ^"[Ljava.lang.String;" (str-keys oks) ^"[Lorg.kvstore.NDArray;" oarrs 0)))
    kv))

(defn type
  "The type name given to create, lowercased."
  [^KVStore kv]
  (with-errors (.type kv)))

(defn rank [^KVStore kv] (with-errors (.rank kv)))

(defn num-workers [^KVStore kv] (with-errors (.numWorkers kv)))

(defn barrier [^KVStore kv] (with-errors (.barrier kv)) kv)

(defn num-dead-node
  ([kv node-id] (num-dead-node kv node-id 60))
  ([^KVStore kv node-id timeout-sec] (with-errors (.numDeadNode kv (int node-id) (int timeout-sec)))))

(defn optimizer
  "A built-in optimizer with parameters, as the reference's optimizer objects: (optimizer :sgd
  {:learning-rate 0.1 :momentum 0.9}). name is :sgd, :nag, :adam, :adagrad, :rmsprop or :test
  (or a string); parameters are the spec's (docs/OPTIMIZERS.md) as keywords, with - for _
  (:learning-rate or :lr, :clip-gradient, :multi-precision, ...); numbers, or true/false for
  :centered, :multi-precision and :lazy-update; nil leaves a parameter at its default.
  :lazy-update (:sgd and :adam; the library's default is true): a row-sparse push updates only
  its rows of the weight and of the state; false applies it densely, so weight decay and
  momentum move every row (docs/OPTIMIZERS.md); the other optimizers refuse it. Returns an
  org.kvstore.Optimizer, which set-optimizer accepts. The library checks it at once: an unknown
  parameter or a value out of range raises ex-info with its message."
  ([name] (optimizer name {}))
  ([name params]
   (with-errors
     (reduce-kv (fn [^org.kvstore.Optimizer o k v]
                  (let [param (str/replace (clojure.core/name k) "-" "_")]
                    (cond (nil? v) o
                          (boolean? v) (.set o param (boolean v))
                          (number? v) (.set o param (double v))
                          :else (fail (str "optimizer parameter " k " must be a number or a boolean, got "
                                           (pr-str v))
                                      {:param k}))))
                (org.kvstore.Optimizer/of (clojure.core/name name))
                (into (sorted-map) params)))))

(defn set-optimizer
  "Installs a built-in optimizer: a spec string (\"sgd(learning_rate=0.1)\"), an optimizer
  from (optimizer :sgd {...}), or a map with the optimizer's name under :optimizer,
  {:optimizer :sgd :learning-rate 0.1 :momentum 0.9}."
  [^KVStore kv spec]
  (cond (string? spec) (with-errors (.setOptimizer kv ^String spec))
        (instance? org.kvstore.Optimizer spec) (with-errors (.setOptimizer kv ^org.kvstore.Optimizer spec))
        (and (map? spec) (:optimizer spec))
        (let [o (optimizer (:optimizer spec) (dissoc spec :optimizer))]
          (with-errors (.setOptimizer kv ^org.kvstore.Optimizer o)))
        :else (fail (str "set-optimizer takes a spec string, an (optimizer ...) or a map with :optimizer, got "
                         (pr-str spec))
                    {}))
  kv)

(defn set-gradient-compression
  "Compresses later pushes with the reference's gradient compression: {:type \"2bit\"
  :threshold 0.5} (or \"1bit\"; keys may be keywords or strings, values anything whose str is
  the value), with a residual per key; {:type \"none\"} turns it off again (the residuals
  are dropped). float32 and float16 pushes of the device and dist_* stores are compressed;
  other stores throw. Returns kv."
  [^KVStore kv params]
  (let [m (java.util.LinkedHashMap.)]
    (doseq [[k v] params] (.put m (if (keyword? k) (name k) (str k)) (if (keyword? v) (name v) (str v))))
    (with-errors (.setGradientCompression kv m)))
  kv)

(defn save-optimizer-states
  "Writes the state of the built-in optimizer (set-optimizer) to the file fname, atomically,
  in the format of docs/OPTIMIZER-STATES.md. Returns kv."
  [^KVStore kv fname]
  (with-errors (.saveOptimizerStates kv (str fname)))
  kv)

(defn load-optimizer-states
  "Replaces the built-in optimizer's state with the one saved in fname; training then goes on
  exactly as from the save. A bad file or a mismatch with this store throws and changes
  nothing. Returns kv."
  [^KVStore kv fname]
  (with-errors (.loadOptimizerStates kv (str fname)))
  kv)

(defn capable?
  "Whether the store has capability (a keyword or string, case-insensitive): :optimizer is
  true for every store type. An unknown name raises ex-info naming the known ones."
  [^KVStore kv capability]
  (with-errors (.isCapable kv ^String (clojure.core/name capability))))

(defn set-updater
  "Sets (fn [key recv stored] ...) as the updater, for int and string keys alike: it receives
  the key as given (an integer or a string) and merges recv into stored in place, e.g. with
  ndarray/add!. recv and stored are only valid during the call. An exception it throws
  reaches the caller of push unchanged, and the stored value stays as it was. nil restores
  the default (assign)."
  [^KVStore kv f]
  (with-errors
    (if (nil? f)
      (do (.setUpdater kv nil) (.setStrUpdater kv nil))
      (do (.setUpdater kv (reify Updater
                            (update [_ key recv stored] (f key recv stored))))
          (.setStrUpdater kv (reify StrUpdater
                               (update [_ key recv stored] (f key recv stored)))))))
  kv)
