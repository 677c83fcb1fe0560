// A pipeline step: writes /kratix/output and /kratix/metadata/status.yaml.
package main

import (
	"fmt"
	"os"
)

func main() {
	if os.Getenv("KRATIX_WORKFLOW_TYPE") == "promise" {
		fmt.Printf("Hello from Promise %s\n", os.Getenv("KRATIX_PROMISE_NAME"))
		return
	}
	name, ns := os.Getenv("KRATIX_OBJECT_NAME"), os.Getenv("KRATIX_OBJECT_NAMESPACE")
	cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  requestedBy: %s\n", name, ns, name)
	must(os.WriteFile("/kratix/output/configmap.yaml", []byte(cm), 0o644))
	must(os.WriteFile("/kratix/metadata/status.yaml", []byte(fmt.Sprintf("message: %s configured\n", name)), 0o644))
	fmt.Printf("Hello from %s %s\n", name, ns)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
