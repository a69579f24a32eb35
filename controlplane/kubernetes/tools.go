//go:build tools

// Package tools pins the upstream commands this module builds. The module exists
// only to give k8s.io/kubernetes the replace directives its go.mod cannot publish.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
