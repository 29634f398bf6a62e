(ns org.kvstore.clojure.context
  "Device contexts: (cpu), (cpu 1), (gpu 0)."
  (:import (org.kvstore Context KVLibrary)))

(defn cpu
  "The CPU context with the given id (default 0)."
  ([] (Context/cpu 0))
  ([id] (Context/cpu (int id))))

(defn gpu
  "The GPU context with the given id (default 0); arrays on an absent GPU raise ex-info."
  ([] (Context/gpu 0))
  ([id] (Context/gpu (int id))))

(def default-context (cpu 0))

(defn num-gpus
  "Usable GPUs now (0 without CUDA or a device)."
  []
  (KVLibrary/gpuCount))

(defn device-type [^Context ctx] (if (.isGpu ctx) :gpu :cpu))

(defn device-id [^Context ctx] (.deviceId ctx))
