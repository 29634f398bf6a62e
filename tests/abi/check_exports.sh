#!/bin/sh
# The library exports only the C ABI: every dynamic symbol it defines starts with KV, the
# SONAME carries the major version, and every function of the public header is exported.
# Usage: check_exports.sh <libkvstore.so> <kvstore.h>
set -eu
lib=$1 header=$2
defined=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
foreign=$(printf '%s\n' "$defined" | grep -v '^KV' || true)
if [ -n "$foreign" ]; then
  echo "symbols outside the KV prefix are exported:"; printf '%s\n' "$foreign"; exit 1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libkvstore.so.0" ] || { echo "unexpected SONAME '$soname'"; exit 1; }
declared=$(grep '^KVSTORE_API ' "$header" | grep -o 'KV[A-Za-z]*(' | tr -d '(' | sort -u)
missing=$(printf '%s\n' "$declared" | while read -r f; do printf '%s\n' "$defined" | grep -qx "$f" || echo "$f"; done)
if [ -n "$missing" ]; then
  echo "declared but not exported:"; printf '%s\n' "$missing"; exit 1
fi
echo "exports: $(printf '%s\n' "$defined" | wc -l) KV symbols, SONAME $soname, all $(printf '%s\n' "$declared" | wc -l) declared functions present"
