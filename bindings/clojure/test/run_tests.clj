;; Runs the Clojure conformance tests and ends with "N passed, N failed" (clojure.test's own
;; summary is not a format CI reads); exits 1 on any failure or error.
(require 'clojure.test 'org.kvstore.clojure.kvstore-test)

(let [{:keys [pass fail error]} (clojure.test/run-tests 'org.kvstore.clojure.kvstore-test)]
  (println (str pass " passed, " (+ fail error) " failed"))
  (shutdown-agents)
  (System/exit (if (zero? (+ fail error)) 0 1)))
