// Package devserver runs all of triage in one process against a local AWS
// stack: emulators (unless AWS endpoints are configured), the bootstrap,
// the HTTP API with the dashboard, a consumer with the demo handlers, and
// the promoter. It is what `triage dev` and `make run` start.
package devserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/config"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/localstack"
)

// Options configures a dev server.
type Options struct {
	Getenv          func(string) string // configuration source (os.Getenv)
	Setenv          func(k, v string) error
	Root            string        // repository root, for installing emulators
	PromoteInterval time.Duration // promoter period (TRIAGE_PROMOTE_INTERVAL or 5 s)
	Out             io.Writer     // where the banner goes
	Logs            io.Writer     // JSON logs
	// Ready, if set, is called with the API's base URL and token once serving.
	Ready func(url, token string)
}

// Run starts everything and blocks until ctx ends, then stops what it
// started: the consumer drains, the server shuts down, the emulators stop.
func Run(ctx context.Context, opt Options) error {
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	if opt.Setenv == nil {
		opt.Setenv = os.Setenv
	}
	cfg, err := config.FromEnv(opt.Getenv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := app.NewLogger(opt.Logs, cfg.LogLevel)

	if opt.Getenv("AWS_ENDPOINT_URL") == "" && (opt.Getenv("AWS_ENDPOINT_URL_SQS") == "" || opt.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "") {
		fmt.Fprintln(opt.Out, "starting local AWS emulators (SQS: fauxqs, DynamoDB: DynamoDB Local)...")
		emu, err := localstack.Start(ctx, opt.Root)
		if err != nil {
			return err
		}
		defer emu.Stop()
		// The SDK reads its endpoints from the environment, exactly as it
		// would for LocalStack or AWS.
		for k, v := range emu.Env() {
			if err := opt.Setenv(k, v); err != nil {
				return err
			}
		}
	}
	for k, v := range map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"} {
		if os.Getenv(k) == "" {
			_ = opt.Setenv(k, v)
		}
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS config: %w", err)
	}
	if _, err := localstack.Bootstrap(ctx, store.NewClient(awsCfg), sqs.NewFromConfig(awsCfg), cfg.Spec); err != nil {
		return err
	}

	token := cfg.Token
	if token == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		token = "dev-" + hex.EncodeToString(b)
		cfg.Token = token
	}
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	tokens, err := a.Tokens(ctx, nil)
	if err != nil {
		return err
	}
	reg, err := a.Handlers()
	if err != nil {
		return err
	}
	interval := opt.PromoteInterval
	if interval <= 0 {
		interval = 5 * time.Second
		if opt.Getenv(config.EnvPromoteInterval) != "" {
			interval = cfg.PromoteInterval
		}
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (set %s to change it): %w", cfg.Addr, config.EnvAddr, err)
	}
	srv := &http.Server{Handler: a.API(tokens, api.Options{}), ReadHeaderTimeout: 10 * time.Second}
	base := "http://" + ln.Addr().String()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("API server: %w", err)
		}
	}()
	consumer := a.Consumer(reg, dispatch.Options{DrainTimeout: 10 * time.Second})
	go func() { defer wg.Done(); _ = consumer.Run(runCtx) }()
	go func() { defer wg.Done(); _ = a.Promoter(promote.Options{}).Run(runCtx, interval) }()

	fmt.Fprintf(opt.Out, "\ntriage is running\n  API:        %s/api/v1\n  dashboard:  %s/#token=%s\n  token:      %s\n\n  export TRIAGE_URL=%s TRIAGE_TOKEN=%s\n  curl -H \"Authorization: Bearer $TRIAGE_TOKEN\" -d '{\"type\":\"echo\",\"payload\":{\"x\":1},\"priority\":\"high\"}' $TRIAGE_URL/api/v1/tasks\n\nPress Ctrl-C to stop.\n",
		base, base, token, token, base, token)
	log.Info("dev server ready", "url", base, "table", cfg.Spec.Table.Name, "promote_interval", interval.String(), "worker_id", consumer.WorkerID())
	if opt.Ready != nil {
		opt.Ready(base, token)
	}

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	fmt.Fprintln(opt.Out, "stopping: draining the consumer...")
	stop()
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	wg.Wait()
	log.Info("dev server stopped")
	return err
}
