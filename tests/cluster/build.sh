#!/usr/bin/env bash
# Build the local test cluster's binaries from pinned Go modules.
#
#   tests/cluster/build.sh               build (if needed) and print the bin dir on stdout
#   tests/cluster/build.sh --print-dir   print the bin dir for the current pins, build nothing
#   tests/cluster/build.sh --check       exit 0 if the bin dir for the current pins is complete
#
# One small Go module per component (kubernetes/, etcd/, kwok/, kueue/) because
# their k8s.io dependency versions differ. Binaries land in
#   ${KUEUE_JF_CACHE:-$HOME/.cache/kueue-jobframework}/bin/<pin-hash>/
# where <pin-hash> covers every go.mod, go.sum and tools.go below plus this script,
# so a fresh clone reuses an existing build and a pin change triggers a rebuild
# (quick when Go's own build cache, GOCACHE, is warm). Progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${KUEUE_JF_CACHE:-$HOME/.cache/kueue-jobframework}"
MODULES=(etcd kubernetes kwok kueue)

pin_hash() {
	(
		cd "$HERE"
		for m in "${MODULES[@]}"; do
			for f in go.mod go.sum tools.go; do
				printf '%s/%s\n' "$m" "$f"
				cat "$m/$f"
			done
		done
		printf 'build.sh\n'
		cat build.sh
	) | sha256sum | cut -c1-16
}

HASH="$(pin_hash)"
OUT="$CACHE/bin/$HASH"

# component  module-dir  package
COMPONENTS=(
	"etcd etcd go.etcd.io/etcd/server/v3"
	"kube-apiserver kubernetes k8s.io/kubernetes/cmd/kube-apiserver"
	"kube-controller-manager kubernetes k8s.io/kubernetes/cmd/kube-controller-manager"
	"kube-scheduler kubernetes k8s.io/kubernetes/cmd/kube-scheduler"
	"kwok kwok sigs.k8s.io/kwok/cmd/kwok"
	"kwokctl kwok sigs.k8s.io/kwok/cmd/kwokctl"
	"kueue kueue sigs.k8s.io/kueue/cmd/kueue"
)

case "${1:-}" in
--print-dir)
	echo "$OUT"
	exit 0
	;;
--check)
	[[ -f "$OUT/.complete" ]]
	exit $?
	;;
"") ;;
*)
	echo "usage: $0 [--print-dir|--check]" >&2
	exit 2
	;;
esac

log() { printf '[cluster-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -f "$OUT/.complete" ]]; then
	log "up to date: $OUT"
	echo "$OUT"
	exit 0
fi

mkdir -p "$CACHE/bin"
exec 9>"$CACHE/bin/.build.lock"
if ! flock -n 9; then
	log "another build holds $CACHE/bin/.build.lock; waiting"
	flock 9
fi
if [[ -f "$OUT/.complete" ]]; then
	log "built by a concurrent run: $OUT"
	echo "$OUT"
	exit 0
fi

command -v go >/dev/null || {
	log "go not found in PATH"
	exit 1
}
PARTIAL="$OUT.partial"
mkdir -p "$PARTIAL"
log "go: $(go version); GOCACHE=$(go env GOCACHE); GOMODCACHE=$(go env GOMODCACHE)"
log "pins hash $HASH -> $OUT"

export GOWORK=off CGO_ENABLED=0
modver() { (cd "$HERE/$1" && go list -m -f '{{.Version}}' "$2"); }
K8S_VERSION="$(modver kubernetes k8s.io/kubernetes)"
KWOK_VERSION="$(modver kwok sigs.k8s.io/kwok)"
KUEUE_VERSION="$(modver kueue sigs.k8s.io/kueue)"
K8S_MAJOR="${K8S_VERSION#v}"
K8S_MAJOR="${K8S_MAJOR%%.*}"
K8S_MINOR="$(echo "$K8S_VERSION" | cut -d. -f2)"
BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

ldflags_for() {
	local flags="-s -w"
	case "$1" in
	kube-*)
		local p=k8s.io/component-base/version
		flags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$K8S_MAJOR -X $p.gitMinor=$K8S_MINOR"
		flags+=" -X $p.gitTreeState=clean -X $p.buildDate=$BUILD_DATE"
		;;
	kwok | kwokctl)
		flags+=" -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
		flags+=" -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${K8S_VERSION#v}"
		;;
	kueue)
		flags+=" -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION"
		flags+=" -X sigs.k8s.io/kueue/pkg/version.BuildDate=$BUILD_DATE"
		;;
	esac
	echo "$flags"
}

TOTAL_START=$SECONDS
TICKER=""
stop_ticker() {
	if [[ -n "$TICKER" ]]; then
		kill "$TICKER" 2>/dev/null || true
		wait "$TICKER" 2>/dev/null || true
		TICKER=""
	fi
}
trap stop_ticker EXIT

for entry in "${COMPONENTS[@]}"; do
	read -r name mod pkg <<<"$entry"
	if [[ -x "$PARTIAL/$name" ]]; then
		log "$name: already built in an earlier interrupted run"
		continue
	fi
	start=$SECONDS
	log "$name: building $pkg (module tests/cluster/$mod)"
	(
		while sleep 15; do
			log "$name: still building, $((SECONDS - start))s elapsed (total $((SECONDS - TOTAL_START))s)"
		done
	) &
	TICKER=$!
	# Only 2 cores on the reference machine: build one component at a time.
	(cd "$HERE/$mod" && go build -mod=readonly -trimpath -ldflags="$(ldflags_for "$name")" \
		${KUEUE_JF_GO_BUILD_FLAGS:-} -o "$PARTIAL/$name.tmp" "$pkg")
	stop_ticker
	mv "$PARTIAL/$name.tmp" "$PARTIAL/$name"
	log "$name: done in $((SECONDS - start))s ($(du -h "$PARTIAL/$name" | cut -f1))"
	echo "$name $((SECONDS - start))" >>"$PARTIAL/build-times.txt"
done

{
	echo "hash=$HASH"
	echo "kubernetes=$K8S_VERSION"
	echo "etcd=$(modver etcd go.etcd.io/etcd/server/v3)"
	echo "kwok=$KWOK_VERSION"
	echo "kueue=$KUEUE_VERSION"
	echo "go=$(go version | awk '{print $3}')"
	echo "built=$BUILD_DATE"
	echo "seconds=$((SECONDS - TOTAL_START))"
} >"$PARTIAL/versions.txt"
touch "$PARTIAL/.complete"
rm -rf "$OUT"
mv "$PARTIAL" "$OUT"
log "all components built in $((SECONDS - TOTAL_START))s: $OUT"

# Keep the newest KUEUE_JF_KEEP_BUILDS (default 3) pin builds, so switching
# between branches stays cheap without filling the disk (~500 MB per build).
# Running processes are unaffected: they hold their executables open.
keep="${KUEUE_JF_KEEP_BUILDS:-3}"
ls -1dt "$CACHE"/bin/*/ 2>/dev/null | tail -n +"$((keep + 1))" | while read -r old; do
	[[ -f "$old/.complete" || "$old" == *.partial/ ]] || continue
	log "pruning old build ${old%/}"
	rm -rf "${old%/}"
done
echo "$OUT"
