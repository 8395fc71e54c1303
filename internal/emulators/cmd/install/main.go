// Command install installs the local emulators into .emulators/ (pinned npm
// packages and the DynamoDB loopback launcher). `make emulators` runs it;
// `triage dev` and the tests also install on demand.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/triagehq/triage/internal/emulators"
)

func main() {
	root, err := emulators.FindRoot(".")
	if err == nil {
		var dir string
		dir, err = emulators.Install(context.Background(), root)
		if err == nil {
			fmt.Println("emulators installed in", dir)
			return
		}
	}
	fmt.Fprintln(os.Stderr, "install emulators:", err)
	os.Exit(1)
}
