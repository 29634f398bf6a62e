(ns org.kvstore.clojure.errors
  "Turns library exceptions into ex-info carrying the library's message and its error code."
  (:import (org.kvstore KVStoreException)))

(defn fail
  "Throws an ex-info for bad input detected on the Clojure side (code -1, invalid argument)."
  [msg data]
  (throw (ex-info msg (merge {:code -1 :name "KV_ERR_INVALID_ARGUMENT"} data))))

(defmacro with-errors
  "Runs body; a KVStoreException becomes (ex-info message {:code c :name n} cause). Anything
  else (an updater's own exception, for one) passes through unchanged."
  [& body]
  `(try
     ~@body
     (catch KVStoreException e#
       (throw (ex-info (.getMessage e#)
                       {:code (.getCode e#) :name (.getCodeName e#)}
                       e#)))))
