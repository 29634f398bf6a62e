(ns org.kvstore.clojure.kvstore-test
  "Clojure conformance tests: the seed tutorial's numbers and scenarios C1-C14 of
  bindings/conformance/SCENARIOS.md."
  (:require [clojure.test :refer [deftest is testing]]
            [clojure.string :as str]
            [org.kvstore.clojure.kvstore :as kvstore]
            [org.kvstore.clojure.ndarray :as ndarray]
            [org.kvstore.clojure.context :as context])
  (:import (java.lang.ref WeakReference)))

(def shape [2 3])

(defn- all-of [v n] (vec (repeat n (float v))))

(defn- filled [v] (ndarray/full shape v))

(defn- caught
  "Runs f; returns the ExceptionInfo it throws (or nil)."
  [f]
  (try (f) nil (catch clojure.lang.ExceptionInfo e e)))

(deftest c1-tutorial-replay
  (let [kv (kvstore/create "local")
        a (ndarray/zeros shape)]
    (kvstore/init kv ["3"] [(ndarray/* (ndarray/ones shape) 2)])
    (kvstore/pull kv ["3"] [a])
    (is (= [2.0 2.0 2.0 2.0 2.0 2.0] (ndarray/->vec a)))
    (kvstore/push kv ["3"] [(ndarray/* (ndarray/ones shape) 8)])
    (kvstore/pull kv ["3"] [a])
    (is (= [8.0 8.0 8.0 8.0 8.0 8.0] (ndarray/->vec a)))
    (let [cpus [(context/cpu 0) (context/cpu 1) (context/cpu 2)]
          b (mapv #(ndarray/ones shape {:ctx %}) cpus)]
      (kvstore/push kv ["3" "3" "3"] b)
      (kvstore/pull kv "3" a)
      (is (= [3.0 3.0 3.0 3.0 3.0 3.0] (ndarray/->vec a))))
    (let [b [(ndarray/ones shape {:ctx (context/cpu 0)}) (ndarray/ones shape {:ctx (context/cpu 1)})]]
      (kvstore/pull kv ["3" "3"] b)
      (is (= [[3.0 3.0 3.0 3.0 3.0 3.0] [3.0 3.0 3.0 3.0 3.0 3.0]] (map ndarray/->vec b))))
    (let [ks ["5" "7" "9"]
          b [(ndarray/zeros shape) (ndarray/zeros shape) (ndarray/zeros shape)]]
      (kvstore/init kv ks [(ndarray/ones shape) (ndarray/ones shape) (ndarray/ones shape)])
      (kvstore/push kv ks [(ndarray/ones shape) (ndarray/ones shape) (ndarray/ones shape)])
      (kvstore/pull kv ks b)
      (is (= (repeat 3 (all-of 1 6)) (map ndarray/->vec b))))
    (testing "the Scala tutorial's updater part, through the Clojure API"
      (let [seen (atom [])]
        (kvstore/set-updater kv (fn [k recv stored]
                                  (swap! seen conj k)
                                  (ndarray/add! stored (ndarray/* recv 2))))
        (kvstore/push kv "3" (ndarray/ones shape))
        (kvstore/pull kv "3" a)
        (is (= (all-of 5 6) (ndarray/->vec a)))
        (is (= ["3"] @seen) "the updater receives the string key")))
    (kvstore/dispose kv)))

(deftest c2-shape-mismatch
  (let [kv (kvstore/init (kvstore/create) 3 (filled 2))
        e (caught #(kvstore/push kv 3 (ndarray/ones [3 2])))
        out (ndarray/zeros shape)]
    (is (some? e))
    (is (= -6 (:code (ex-data e))))
    (is (= "KV_ERR_SHAPE_MISMATCH" (:name (ex-data e))))
    (is (every? #(str/includes? (ex-message e) %) ["3" "(2,3)" "(3,2)"]) (ex-message e))
    (kvstore/pull kv 3 out)
    (is (= (all-of 2 6) (ndarray/->vec out)) "stored value unchanged")))

(deftest c3-dtype-mismatch
  (let [kv (kvstore/init (kvstore/create) 3 (filled 2))
        e (caught #(kvstore/push kv 3 (ndarray/ones shape {:dtype :float64})))
        out (ndarray/zeros shape)]
    (is (= -7 (:code (ex-data e))))
    (is (every? #(str/includes? (ex-message e) %) ["float32" "float64"]) (ex-message e))
    (kvstore/pull kv 3 out)
    (is (= (all-of 2 6) (ndarray/->vec out)))))

(deftest c4-unknown-key
  (let [kv (kvstore/init (kvstore/create) 3 (filled 2))
        out (filled 7)
        ep (caught #(kvstore/push kv 42 (filled 1)))
        el (caught #(kvstore/pull kv 42 out))]
    (is (= -3 (:code (ex-data ep))))
    (is (str/includes? (ex-message ep) "42"))
    (is (= -3 (:code (ex-data el))))
    (is (str/includes? (ex-message el) "42"))
    (is (= (all-of 7 6) (ndarray/->vec out)) "the pull output is not written")))

(deftest c5-duplicate-init
  (let [kv (kvstore/init (kvstore/create) "w" (filled 2))
        e (caught #(kvstore/init kv "w" (filled 5)))
        out (ndarray/zeros shape)]
    (is (= -4 (:code (ex-data e))))
    (kvstore/pull kv "w" out)
    (is (= (all-of 2 6) (ndarray/->vec out)) "the first init's value is kept")))

(deftest c6-mixed-key-kinds
  (let [ki (kvstore/init (kvstore/create) 3 (filled 2))
        ks (kvstore/init (kvstore/create) "3" (filled 4))
        out (ndarray/zeros shape)]
    (is (= -5 (:code (ex-data (caught #(kvstore/push ki "3" (filled 1)))))))
    (is (= -5 (:code (ex-data (caught #(kvstore/pull ks 3 out))))))
    (is (= -1 (:code (ex-data (caught #(kvstore/push ki [3 "3"] [(filled 1) (filled 1)])))))
        "a call mixing kinds is refused before reaching the library")
    (kvstore/pull ki 3 out)
    (is (= (all-of 2 6) (ndarray/->vec out)))
    (kvstore/pull ks "3" out)
    (is (= (all-of 4 6) (ndarray/->vec out)))))

(deftest c7-updater-raises
  (let [kv (kvstore/init (kvstore/create) 3 (filled 2))
        boom (ex-info "boom from the updater" {:mine true})
        out (ndarray/zeros shape)]
    (kvstore/set-updater kv (fn [_ recv stored] (ndarray/add! stored recv) (throw boom)))
    (let [e (try (kvstore/push kv 3 (filled 1)) nil (catch Exception e e))]
      (is (identical? boom e) "the updater's own exception reaches push"))
    (kvstore/pull kv 3 out)
    (is (= (all-of 2 6) (ndarray/->vec out)) "unchanged")
    (kvstore/set-updater kv (fn [_ recv stored] (ndarray/add! stored recv)))
    (kvstore/push kv 3 (filled 1))
    (kvstore/pull kv 3 out)
    (is (= (all-of 3 6) (ndarray/->vec out)))))

(deftest c8-stateful-updater
  (let [kv (kvstore/init (kvstore/create) [1 2] [(filled 0) (filled 100)])
        state (atom {})
        log (atom [])
        out (ndarray/zeros shape)]
    (kvstore/set-updater kv (fn [k recv stored]
                              (let [n (get (swap! state update k (fnil inc 0)) k)]
                                (swap! log conj [k n])
                                (ndarray/add! stored (ndarray/* recv n)))))
    (doseq [k [1 1 2 1]] (kvstore/push kv k (filled 1)))
    (is (= [[1 1] [1 2] [2 1] [1 3]] @log))
    (kvstore/pull kv 1 out)
    (is (= (all-of 6 6) (ndarray/->vec out)))
    (kvstore/pull kv 2 out)
    (is (= (all-of 101 6) (ndarray/->vec out)))))

(deftest c9-int-and-string-keys
  (let [ki (kvstore/init (kvstore/create) [0 1] [(filled 1) (filled 2)])
        ks (kvstore/init (kvstore/create) ["a" "b"] [(filled 1) (filled 2)])
        seen (atom [])
        out (ndarray/zeros shape)]
    (kvstore/set-updater ki (fn [k recv stored] (swap! seen conj k) (ndarray/add! stored recv)))
    (kvstore/set-updater ks (fn [k recv stored] (swap! seen conj k) (ndarray/add! stored recv)))
    (kvstore/push ki 1 (filled 1))
    (kvstore/push ks "b" (filled 1))
    (is (= [1 "b"] @seen) "each updater gets its key as given")
    (kvstore/pull ki 1 out)
    (is (= (all-of 3 6) (ndarray/->vec out)))
    (kvstore/pull ks "b" out)
    (is (= (all-of 3 6) (ndarray/->vec out)))))

(deftest c10-lists
  (let [kv (kvstore/init (kvstore/create) "k" (filled 0))
        outs [(filled -1) (filled -1) (filled -1)]]
    (kvstore/push kv "k" [(filled 1) (filled 2) (filled 3)])
    (kvstore/pull kv "k" outs)
    (is (= (repeat 3 (all-of 6 6)) (map ndarray/->vec outs)) "one key, several outputs")
    (kvstore/init kv ["x" "y"] [(filled 0) (filled 0)])
    (kvstore/push kv ["x" "y" "x"] [(filled 1) (filled 2) (filled 3)])
    (kvstore/pull kv ["x" "y"] (take 2 outs))
    (is (= [(all-of 4 6) (all-of 2 6)] (map ndarray/->vec (take 2 outs))))
    (is (= -1 (:code (ex-data (caught #(kvstore/push kv ["x" "y"] [(filled 1) (filled 1) (filled 1)])))))
        "keys and values of different lengths")))

(deftest c11-pushpull-and-broadcast
  (let [kv (kvstore/init (kvstore/create) 3 (filled 1))
        out (ndarray/zeros shape)]
    (kvstore/set-updater kv (fn [_ recv stored] (ndarray/add! stored recv)))
    (kvstore/push-pull kv 3 (filled 5) out)
    (is (= (all-of 6 6) (ndarray/->vec out)))
    (kvstore/broadcast kv 4 (filled 7) out)
    (is (= (all-of 7 6) (ndarray/->vec out)))
    (is (= -4 (:code (ex-data (caught #(kvstore/broadcast kv 4 (filled 8) out))))))
    (kvstore/pull kv 4 out)
    (is (= (all-of 7 6) (ndarray/->vec out)))))

(deftest c12-dtypes
  (let [kv (kvstore/create)]
    (doseq [[k dt expected] [[0 :float32 (all-of 7 3)] [1 :float64 [7.0 7.0 7.0]] [2 :float16 (all-of 7 3)]
                             [3 :int32 [7 7 7]] [4 :int64 [7 7 7]] [5 :uint8 [7 7 7]]]]
      (kvstore/init kv k (ndarray/full [3] 3 {:dtype dt}))
      (kvstore/push kv k [(ndarray/full [3] 2 {:dtype dt}) (ndarray/full [3] 5 {:dtype dt})])
      (let [out (ndarray/zeros [3] {:dtype dt})]
        (kvstore/pull kv k out)
        (is (= dt (ndarray/dtype out)))
        (is (= expected (ndarray/->vec out)) (str dt))))))

(deftest c13-type-name
  (let [kv (kvstore/create "LOCAL")]
    (is (= "local" (kvstore/type kv)))
    (is (= 0 (kvstore/rank kv)))
    (is (= 1 (kvstore/num-workers kv)))
    (is (= kv (kvstore/barrier kv))))
  (let [e (caught #(kvstore/create "nope"))]
    (is (= -1 (:code (ex-data e))))
    (is (every? #(str/includes? (ex-message e) %) ["nope" "local" "dist_sync"]) (ex-message e))))

(deftest capabilities-and-optimizers
  (let [kv (kvstore/create "local")]
    (is (true? (kvstore/capable? kv :optimizer)))
    (is (true? (kvstore/capable? kv "OPTIMIZER")))
    (let [e (caught #(kvstore/capable? kv :sparse))]
      (is (= "KV_ERR_INVALID_ARGUMENT" (:name (ex-data e))))
      (is (every? #(str/includes? (ex-message e) %) ["sparse" "\"optimizer\""]) (ex-message e)))
    (is (= "sgd(learning_rate=0.1,momentum=0.9)"
           (.spec ^org.kvstore.Optimizer (kvstore/optimizer :sgd {:learning-rate 0.1 :momentum 0.9}))))
    (is (= "rmsprop(centered=1,gamma1=0.8)"
           (str (kvstore/optimizer :rmsprop {:gamma1 0.8 :centered true :clip-weights nil}))))
    (is (= "adam" (str (kvstore/optimizer "adam"))))
    (let [e (caught #(kvstore/optimizer :adam {:momentum 0.9}))]
      (is (= "KV_ERR_INVALID_ARGUMENT" (:name (ex-data e))))
      (is (str/includes? (ex-message e) "momentum")))
    (is (some? (caught #(kvstore/optimizer :sgd {:momentum 2}))) "out of range at construction")
    (is (some? (caught #(kvstore/optimizer :sgd {:momentum "0.9"}))) "not a number")
    (is (some? (caught #(kvstore/set-optimizer kv 42))))
    (kvstore/init kv 3 (ndarray/ones shape))
    (let [out (ndarray/zeros shape)]
      (-> kv
          (kvstore/set-optimizer {:optimizer :test :rescale-grad 2})
          (kvstore/push 3 (filled 3))
          (kvstore/pull 3 out))
      (is (= (all-of 7 6) (ndarray/->vec out)))
      (-> kv
          (kvstore/set-optimizer (kvstore/optimizer :sgd {:lr 0.5}))
          (kvstore/push 3 (filled 2))
          (kvstore/pull 3 out))
      (is (= (all-of 6 6) (ndarray/->vec out))))
    (kvstore/dispose kv)))

;; :lazy-update of sgd and adam, and its effect on row-sparse pushes.
(defn- after-row-sparse-pushes
  "The 4x2 stored value after row-sparse pushes ([row gradient] each) to ones under opt."
  [opt & pushes]
  (let [kv (kvstore/create "local")
        out (ndarray/zeros [4 2])]
    (kvstore/init kv 0 (ndarray/ones [4 2]))
    (kvstore/set-optimizer kv opt)
    (doseq [[row g] pushes]
      (kvstore/push kv 0 (ndarray/row-sparse-array [g g] [row] [4 2])))
    (kvstore/pull kv 0 out)
    (kvstore/dispose kv)
    (ndarray/->vec out)))

(defn- close? [expected actual]
  (and (= (count expected) (count actual))
       (every? #(<= (Math/abs (double %)) 1e-6) (map - expected actual))))

(deftest lazy-update
  (is (= "sgd(lazy_update=0,learning_rate=0.5)"
         (str (kvstore/optimizer :sgd {:learning-rate 0.5 :lazy-update false}))))
  (is (= "adam(lazy_update=1,wd=0.1)" (str (kvstore/optimizer :adam {:wd 0.1 :lazy-update true}))))
  (testing "optimizers without a lazy path refuse it as any parameter they do not have"
    (doseq [o [:nag :adagrad :rmsprop :test]]
      (let [e (caught #(kvstore/optimizer o {:lazy-update false}))]
        (is (= "KV_ERR_INVALID_ARGUMENT" (:name (ex-data e))) (str o))
        (is (str/includes? (str (ex-message e)) "lazy_update") (str o)))))
  ;; sgd(lr=0.5, wd=0.1), row 3 pushed with 1: 1 - 0.5*(1 + 0.1) = 0.45 there; a dense update also
  ;; decays the rows not pushed, 1 - 0.5*0.1 = 0.95. The library's default is lazy.
  (let [sgd-wd (fn [lazy] (kvstore/optimizer :sgd {:learning-rate 0.5 :wd 0.1 :lazy-update lazy}))
        lazy (after-row-sparse-pushes (sgd-wd true) [3 1])]
    (is (close? [1 1 1 1 1 1 0.45 0.45] lazy) (str lazy))
    (is (= lazy (after-row-sparse-pushes (sgd-wd nil) [3 1])) "lazy is the default")
    (is (close? [0.95 0.95 0.95 0.95 0.95 0.95 0.45 0.45] (after-row-sparse-pushes (sgd-wd false) [3 1]))))
  ;; sgd(lr=0.5, momentum=0.9): row 1 pushed with 1 (momentum -0.5, w 0.5), then row 3: the
  ;; momentum carried over moves row 1 again (0.5 - 0.45 = 0.05) only in a dense update.
  (let [sgd-mom (fn [lazy] (kvstore/optimizer :sgd {:learning-rate 0.5 :momentum 0.9 :lazy-update lazy}))]
    (is (close? [1 1 0.5 0.5 1 1 0.5 0.5] (after-row-sparse-pushes (sgd-mom true) [1 1] [3 1])))
    (is (close? [1 1 0.05 0.05 1 1 0.5 0.5] (after-row-sparse-pushes (sgd-mom false) [1 1] [3 1])))))

(deftest ndarray-rows
  (let [a (ndarray/array [0 1 2 3 4 5] [3 2])]
    (is (= [(float 2) (float 3)] (ndarray/->vec (ndarray/row a 1))))
    (is (= [(float 4) (float 5)] (ndarray/->vec (ndarray/row a -1))))
    (is (= (mapv float [0 1 2 3]) (ndarray/->vec (ndarray/rows a 0 2))))
    (is (= a (ndarray/set-row! a 0 9)))
    (ndarray/set-row! a 2 (ndarray/array [7 8] [2]))
    (is (= (mapv float [9 9 2 3 7 8]) (ndarray/->vec a)))
    (is (thrown? IndexOutOfBoundsException (ndarray/row a 3)))
    (let [e (caught #(ndarray/set-row! a 0 (ndarray/zeros [3])))]
      (is (= "KV_ERR_SHAPE_MISMATCH" (:name (ex-data e)))))
    (is (= (mapv float [9 9 2 3 7 8]) (ndarray/->vec a)) "failed writes change nothing")))

(defn- rss-kb []
  ;; Files/readAllLines: slurp's reader asks /proc for available(), which fails there.
  (->> (java.nio.file.Files/readAllLines (java.nio.file.Paths/get "/proc/self/status" (make-array String 0)))
       (some #(when (str/starts-with? % "VmRSS:") (Long/parseLong (str/replace % #"[^0-9]" ""))))))

(defn- settle [] (dotimes [_ 3] (System/gc) (Thread/sleep 50)))

(defn- register-updater
  "In its own function so that no local of the caller keeps the updater reachable."
  [kv]
  ;; f closes over a fresh atom, so it is a new object (a fn without closed-over locals may be
  ;; a shared constant that is never collected).
  (let [calls (atom 0)
        f (fn [_ recv stored] (swap! calls inc) (ndarray/add! stored recv))]
    (kvstore/set-updater kv f)
    (WeakReference. f)))

(defn- alive?
  "Whether the referent is still there (a function, so that no test form holds the referent)."
  [^WeakReference w]
  (some? (.get w)))

(deftest c14-release
  (let [cycles (fn [n] (dotimes [i n] (let [a (ndarray/zeros [256])] (ndarray/fill! a i) (ndarray/dispose a))))
        _ (cycles 20000)
        _ (settle)
        before (rss-kb)
        _ (cycles 100000)
        _ (settle)
        after (rss-kb)]
    (println "   10^5 array cycles: RSS" before "kB ->" after "kB")
    (is (< (- after before) (* 16 1024)) "RSS growth of 10^5 array cycles below 16 MiB"))
  (let [store-cycle (fn [] (let [kv (kvstore/create) v (ndarray/ones [1024])]
                             (kvstore/set-updater kv (fn [_ r s] (ndarray/add! s r)))
                             (kvstore/init kv 1 v)
                             (kvstore/push kv 1 v)
                             (ndarray/dispose v)
                             (kvstore/dispose kv)))
        _ (dotimes [_ 200] (store-cycle))
        _ (settle)
        before (rss-kb)
        _ (dotimes [_ 1000] (store-cycle))
        _ (settle)
        after (rss-kb)]
    (println "   10^3 store cycles: RSS" before "kB ->" after "kB")
    (is (< (- after before) (* 16 1024)) "RSS growth of 10^3 store cycles below 16 MiB"))
  (let [kv (kvstore/create)
        weak (register-updater kv)]
    (settle)
    (is (alive? weak) "the store keeps its updater alive")
    (kvstore/dispose kv)
    (loop [i 0] (when (and (alive? weak) (< i 50)) (settle) (recur (inc i))))
    (is (not (alive? weak)) "after dispose the free hook released the updater")))

(deftest dispose-during-a-call
  ;; Issue 10: disposing a store or an array while a call on it runs raises KV_ERR_BUSY and
  ;; frees nothing; both stay usable.
  (let [kv (kvstore/init (kvstore/create) 3 (filled 2))
        v (filled 1)
        out (ndarray/zeros shape)
        entered (java.util.concurrent.CountDownLatch. 1)
        proceed (java.util.concurrent.CountDownLatch. 1)
        busy? (fn [e] (= "KV_ERR_BUSY" (:name (ex-data e))))]
    (kvstore/set-updater kv (fn [_ recv stored]
                              (.countDown entered)
                              (.await proceed)
                              (ndarray/add! stored recv)))
    (let [pusher (future (kvstore/push-pull kv 3 v out))]
      (.await entered)
      (let [e (caught #(kvstore/dispose kv))]
        (is (busy? e) "dispose of the store while another thread's push runs its updater")
        (is (= -19 (:code (ex-data e))))
        (is (str/includes? (str (ex-message e)) "stays usable") (ex-message e)))
      (is (busy? (caught #(ndarray/dispose v))) "dispose of the pushed array meanwhile")
      (is (busy? (caught #(ndarray/dispose out))) "dispose of the push-pull output meanwhile")
      (is (= "local" (kvstore/type kv)) "the store answers other calls meanwhile")
      (.countDown proceed)
      (is (= kv (deref pusher 10000 :timeout)) "the push finished and succeeded"))
    (is (= (all-of 3 6) (ndarray/->vec out)) "with the pushed value merged")
    (kvstore/set-updater kv (fn [_ _ _] (kvstore/dispose kv)))
    (is (busy? (try (kvstore/push kv 3 v) nil (catch Exception e e)))
        "dispose from inside the store's own updater")
    (kvstore/set-updater kv nil)
    (kvstore/push kv 3 v)
    (kvstore/pull kv 3 out)
    (is (= (all-of 1 6) (ndarray/->vec out)) "the store is usable after the refused disposes")
    (kvstore/dispose kv)
    (ndarray/dispose v)
    (is (.isClosed v) "disposed once no call runs")))

(deftest optimizer-states-resume
  ;; Resuming from saved optimizer states is bit-identical to training on; a truncated file is
  ;; refused and changes nothing.
  (let [job (fn [w0]
              (doto (kvstore/create "local")
                (kvstore/set-optimizer "adam(learning_rate=0.01)")
                (kvstore/init 0 (ndarray/array w0 shape))))
        train (fn [kv from to]
                (doseq [step (range from to)]
                  (kvstore/push kv 0 (ndarray/array (map #(Math/sin (* (inc %) (inc step))) (range 6))
                                                    shape))))
        weights (fn [kv] (let [o (ndarray/zeros shape)] (kvstore/pull kv 0 o) (ndarray/->vec o)))
        file (java.io.File/createTempFile "kvstates" ".kvos")
        w0 [1 2 3 4 5 6]
        whole (job w0)
        first-job (job w0)]
    (train whole 0 5)
    (train first-job 0 3)
    (kvstore/save-optimizer-states first-job file)
    (let [second-job (job (weights first-job))]
      (kvstore/load-optimizer-states second-job (.getPath file))
      (train second-job 3 5)
      (is (= (weights whole) (weights second-job)) "resumed weights bit-identical")
      (kvstore/dispose second-job))
    (let [bytes (java.nio.file.Files/readAllBytes (.toPath file))]
      (java.nio.file.Files/write (.toPath file) (java.util.Arrays/copyOf bytes (dec (alength bytes)))
                                 (make-array java.nio.file.OpenOption 0)))
    (let [e (caught #(kvstore/load-optimizer-states first-job file))]
      (is (= "KV_ERR_INVALID_ARGUMENT" (:name (ex-data e))))
      (is (str/includes? (ex-message e) "truncated") (ex-message e)))
    (train first-job 3 5)
    (is (= (weights whole) (weights first-job)) "a refused load changed nothing")
    (.delete file)
    (kvstore/dispose whole)
    (kvstore/dispose first-job)))

(deftest row-sparse
  (let [s62 [6 2]
        table (ndarray/array (for [r (range 6) c (range 2)] (+ (* 10 r) c)) s62)
        g (ndarray/row-sparse-array [4 4.5 1 1.5] [4 1] s62)]
    (testing "round trip of data and ids"
      (is (= :row-sparse (ndarray/stype g)))
      (is (= :default (ndarray/stype table)))
      (is (= [6 2] (ndarray/shape g)))
      (is (= [1 4] (ndarray/indices g)) "ids sorted")
      (is (= [1.0 1.5 4.0 4.5] (ndarray/->vec (ndarray/data g))) "rows move with their ids")
      (is (= [0.0 0.0 1.0 1.5 0.0 0.0 0.0 0.0 4.0 4.5 0.0 0.0] (ndarray/->vec g)) "->vec: logical contents")
      (is (= (ndarray/->vec g) (ndarray/->vec (ndarray/->dense g))))
      (is (= [1] (ndarray/indices (ndarray/tostype (ndarray/array [0 0 0 2] [2 2]) :row-sparse)))
          "dense to row-sparse keeps the non-zero rows")
      (is (= "KV_ERR_INVALID_ARGUMENT"
             (:name (ex-data (caught #(ndarray/row-sparse-array [1 1 2 2] [3 3] s62)))))
          "a repeated id"))
    (testing "dense-only operations raise NOT_SUPPORTED with the C code"
      (let [e (caught #(ndarray/+ g 1))]
        (is (= "KV_ERR_NOT_SUPPORTED" (:name (ex-data e))))
        (is (= org.kvstore.KVNotSupportedException/CODE (:code (ex-data e)))))
      (is (= "KV_ERR_NOT_SUPPORTED" (:name (ex-data (caught #(ndarray/row g 0)))))))
    (doseq [k [7 "w"]]
      (testing (str "key " (pr-str k))
        (let [kv (kvstore/create "local")
              h (ndarray/row-sparse-array (ndarray/array [1 1 2 2] [2 2]) [5 4] s62)
              dense (ndarray/zeros s62)
              o1 (ndarray/row-sparse-zeros s62)
              o2 (ndarray/row-sparse-zeros s62)]
          (kvstore/init kv k table)
          (kvstore/push kv k [g h])
          (kvstore/pull kv k dense)
          (is (= [0.0 0.0 1.0 1.5 0.0 0.0 0.0 0.0 6.0 6.5 1.0 1.0] (ndarray/->vec dense))
              "push sums by the union of rows")
          (kvstore/row-sparse-pull kv k [o1 o2] [4 1 4 0])
          (is (= [0 1 4] (ndarray/indices o1)) "unique sorted ids")
          (is (= [0.0 0.0 1.0 1.5 6.0 6.5] (ndarray/->vec (ndarray/data o1))) "those rows")
          (is (= (ndarray/->vec (ndarray/data o1)) (ndarray/->vec (ndarray/data o2))) "one row-ids for both")
          (is (= "KV_ERR_SHAPE_MISMATCH"
                 (:name (ex-data (caught #(kvstore/push kv k (ndarray/row-sparse-array [1 1] [0] [5 2])))))))
          (is (= "KV_ERR_INVALID_ARGUMENT" (:name (ex-data (caught #(kvstore/row-sparse-pull kv k o1 [1 6])))))
              "a row id out of range")
          (let [after (ndarray/zeros s62)]
            (kvstore/pull kv k after)
            (is (= (ndarray/->vec dense) (ndarray/->vec after)) "failed calls leave the stored value"))
          (is (= [0 1 4] (ndarray/indices o1)) "and the output")
          (kvstore/dispose kv))))))

;; 2bit, threshold 0.5, by hand: 0.6 sends +0.5, -0.7 sends -0.5; the residuals carry the rest.
(deftest gradient-compression
  (let [shape [2 3]
        kv (kvstore/create "device")
        g [0.3 0.6 -0.7 0.1 0 0.25]
        push-pull (fn []
                    (kvstore/push kv 0 (ndarray/array g shape))
                    (let [o (ndarray/zeros shape)] (kvstore/pull kv 0 o) (map double (ndarray/->vec o))))]
    (kvstore/set-gradient-compression kv {:type "2bit" :threshold 0.5})
    (kvstore/init kv 0 (ndarray/zeros shape))
    (is (= [0.0 0.5 -0.5 0.0 0.0 0.0] (push-pull)) "first push")
    (is (= [0.5 0.5 -0.5 0.0 0.0 0.5] (push-pull)) "second push: the residuals")
    (kvstore/set-gradient-compression kv {:type :none})
    (is (= (map #(double (float %)) g) (push-pull)) "off again")
    (let [local (kvstore/create "local")
          e (caught #(kvstore/set-gradient-compression local {:type "2bit"}))]
      (is (= "KV_ERR_NOT_SUPPORTED" (:name (ex-data e))))
      (kvstore/dispose local))
    (kvstore/dispose kv)))
