// Command etcd is upstream etcd's own server main (go.etcd.io/etcd/server/v3/main.go),
// rebuilt here because `go install` refuses a module with replace directives.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
