//go:build tools

// Package tools pins kwok, the controller that plays kubelet for simulated nodes, and
// kwokctl from the same module (built only by `make bench`, to compare cluster start).
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
