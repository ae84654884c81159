//go:build tools

// Package tools pins the Kueue manager built by ../build.sh.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
