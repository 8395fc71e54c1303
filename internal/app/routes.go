package app

import (
	"fmt"

	"github.com/triagehq/triage/internal/handler"
)

// routeHandler returns the handler for a route target.
func (a *App) routeHandler(target string) (handler.Handler, error) {
	return nil, fmt.Errorf("target %q: remote handlers are not built yet", target)
}
