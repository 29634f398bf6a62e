;; A worker of a real distributed job (started by kvstore-launch; see ../CMakeLists.txt). A
;; worker refuses updaters (they run on the servers): set-updater must raise ex-info with
;; KV_ERR_NOT_SUPPORTED every time, the refused registrations must be released exactly once by
;; the binding (run under -Xcheck:jni, which aborts on a second DeleteGlobalRef) and not leak,
;; and the store must work afterwards. Prints "PASS ..." and "N passed, N failed"; exits 1 on
;; any failure.
(require '[org.kvstore.clojure.kvstore :as kvstore]
         '[org.kvstore.clojure.ndarray :as ndarray])
(import '(java.lang.ref WeakReference))

(def results (atom []))

(defn check [what ok]
  (swap! results conj ok)
  (when-not ok (println "FAIL:" what)))

(defn refused-registration
  "Tries to register a fresh updater fn (it closes over a new atom, so it is a new object);
  returns [refused? weak-reference-to-the-fn]."
  [kv]
  (let [calls (atom 0)
        f (fn [_ recv stored] (swap! calls inc) (ndarray/add! stored recv))
        e (try (kvstore/set-updater kv f) nil (catch clojure.lang.ExceptionInfo e e))]
    [(= "KV_ERR_NOT_SUPPORTED" (:name (ex-data e))) (WeakReference. f)]))

(let [kv (kvstore/create "dist_sync")
      rank (kvstore/rank kv)
      n (kvstore/num-workers kv)
      tries 100
      regs (vec (repeatedly tries #(refused-registration kv)))
      alive (fn [] (count (filter #(some? (.get ^WeakReference (second %))) regs)))]
  (check (str "every set-updater on a worker raises KV_ERR_NOT_SUPPORTED ("
              (count (filter first regs)) " of " tries ")")
         (every? first regs))
  (loop [i 0] (when (and (pos? (alive)) (< i 50)) (System/gc) (Thread/sleep 50) (recur (inc i))))
  (check (str "every refused updater is collectable (" (alive) " still reachable)") (zero? (alive)))
  ;; The store is unaffected: a sync round sums every worker's push.
  (let [out (ndarray/zeros [4])]
    (kvstore/init kv 7 (ndarray/zeros [4]))
    (kvstore/push kv 7 (ndarray/full [4] (inc rank)))
    (kvstore/pull kv 7 out)
    (check (str "a sync round after the refusals sums every worker's push: " (ndarray/->vec out))
           (= (vec (repeat 4 (float (/ (* n (inc n)) 2)))) (ndarray/->vec out))))
  (kvstore/dispose kv)
  (let [p (count (filter true? @results))
        f (- (count @results) p)]
    (when (zero? f) (println "PASS clojure dist worker" rank ": updaters refused"))
    (println (str p " passed, " f " failed"))
    (shutdown-agents)
    (System/exit (if (zero? f) 0 1))))
