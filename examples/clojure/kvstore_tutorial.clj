;; The Clojure KVStore tutorial (shared/seeds/clojure-kvstore.md) as a script: the tutorial's
;; code with its requires changed to org.kvstore.clojure.*, printing each value the tutorial
;; shows after ";=>".
;;
;;   LD_LIBRARY_PATH=<build dir> clojure -cp <kvstore.jar>:bindings/clojure/src examples/clojure/kvstore_tutorial.clj
(ns docs.kvstore
  (:require [org.kvstore.clojure.kvstore :as kvstore]
            [org.kvstore.clojure.ndarray :as ndarray]
            [org.kvstore.clojure.context :as context]))

;; Basic Push and Pull / Initialization
(def kv (kvstore/create "local")) ;; create a local kvstore
(def shape [2 3])
;;; init the kvstore with a vector of keys (strings) and ndarrays
(kvstore/init kv ["3"] [(ndarray/* (ndarray/ones shape) 2)])
(def a (ndarray/zeros shape))
(kvstore/pull kv ["3"] [a])
(prn (ndarray/->vec a)) ;=> [2.0 2.0 2.0 2.0 2.0 2.0]

;; Push, Aggregation, and Updater
(kvstore/push kv ["3"] [(ndarray/* (ndarray/ones shape) 8)])
(kvstore/pull kv ["3"] [a])
(prn (ndarray/->vec a)) ;=>[8.0 8.0 8.0 8.0 8.0 8.0]

(def cpus [(context/cpu 0) (context/cpu 1) (context/cpu 2)])
(def b [(ndarray/ones shape {:ctx (nth cpus 0)})
        (ndarray/ones shape {:ctx (nth cpus 1)})
        (ndarray/ones shape {:ctx (nth cpus 2)})])
(kvstore/push kv ["3" "3" "3"] b)
(kvstore/pull kv "3" a)
(prn (ndarray/->vec a)) ;=> [3.0 3.0 3.0 3.0 3.0 3.0]

;; Pull
(def b [(ndarray/ones shape {:ctx (context/cpu 0)})
        (ndarray/ones shape {:ctx (context/cpu 1)})])
(kvstore/pull kv ["3" "3"] b)
(prn (map ndarray/->vec b)) ;=> ([3.0 3.0 3.0 3.0 3.0 3.0] [3.0 3.0 3.0 3.0 3.0 3.0])

;; List Key-Value Pairs
(def ks ["5" "7" "9"])
(kvstore/init kv ks [(ndarray/ones shape) (ndarray/ones shape) (ndarray/ones shape)])
(kvstore/push kv ks [(ndarray/ones shape) (ndarray/ones shape) (ndarray/ones shape)])
(def b [(ndarray/zeros shape) (ndarray/zeros shape) (ndarray/zeros shape)])
(kvstore/pull kv ks b)
(prn (map ndarray/->vec b)) ;=> ([1.0 1.0 1.0 1.0 1.0 1.0] [1.0 1.0 1.0 1.0 1.0 1.0] [1.0 1.0 1.0 1.0 1.0 1.0])

(kvstore/dispose kv)
