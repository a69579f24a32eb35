//go:build tools

// Package tools pins kwok, the controller that plays kubelet for simulated nodes.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
