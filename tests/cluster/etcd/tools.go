//go:build tools

// Package tools pins the etcd server (the version Kubernetes 1.36 uses, see
// k8s.io/kubernetes build/dependencies.yaml) built by ../build.sh.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
