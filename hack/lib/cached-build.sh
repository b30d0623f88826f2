# Sourced by the hack/build-*.sh scripts that build a third-party Go program from a
# wrapper module under hack/ (edge-translate, cert-manager, external-dns, pebble), so
# that each of them caches, locks and installs the same way.
#
#   cached_build NAME SRC OUT PACKAGE MINUTES [LDFLAGS]
#
# builds PACKAGE (a main package: "." or an import path the module at SRC requires)
# into OUT and prints OUT. The built binary is kept in a cache outside the checkout
# (ANCHORAGE_CACHE, default ~/.cache/anchorage), keyed by the hash of every file under
# SRC (its go.mod, go.sum and sources) and LDFLAGS, so a fresh clone on the same
# machine reuses it; a flock makes concurrent callers wait for one build. OUT carries
# the key beside it (OUT.key), so an up-to-date OUT returns at once. MINUTES is the
# cold build time the log line announces.

cached_build() {
  local name=$1 src=$2 out=$3 pkg=$4 minutes=$5 ldflags=${6:-}
  local cache_root=${ANCHORAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anchorage}
  local key
  key=$(cached_build_key "$src" "$ldflags")
  local cached=$cache_root/$name/$key/$name

  if [ -x "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$key" ]; then echo "$out"; return 0; fi

  mkdir -p "$cache_root"
  exec 9>"$cache_root/$name.lock"
  flock 9
  if [ ! -x "$cached" ]; then
    echo "$(basename "$0" .sh): building $name from the Go module proxy (one time, ~$minutes min on 2 cores)" >&2
    mkdir -p "$(dirname "$cached")"
    (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$cached.tmp" "$pkg")
    mv "$cached.tmp" "$cached"
  fi
  exec 9>&-
  mkdir -p "$(dirname "$out")"
  ln -f "$cached" "$out" 2>/dev/null || cp -f "$cached" "$out"
  echo "$key" >"$out.key"
  echo "$out"
}

# cached_build_key SRC LDFLAGS: the files under SRC in byte order of their paths, then
# the ldflags when there are any (a wrapper without them keeps the key it always had).
cached_build_key() {
  local src=$1 ldflags=$2
  {
    (cd "$src" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat)
    [ -z "$ldflags" ] || printf '%s' "$ldflags"
  } | sha256sum | cut -c1-16
}
