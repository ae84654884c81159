//go:build tools

// Package tools pins kwok (fake nodes and pod lifecycle) built by ../build.sh.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
