package triage

import "github.com/triagehq/triage/internal/config"

// Config is every setting of a triage deployment, for the worker, the
// direct transport and the dispatcher's own functions alike. Each field's
// comment gives its default and the TRIAGE_* variable that sets it. Zero
// means unset; where zero is also a meaningful value (no reserved slots,
// no depth limit), the field takes Off. A Config goes through
// WithDefaults, then Validate, wherever it is used; call them yourself to
// see the effective settings or check them early.
//
// The type is defined in triage's internal config package, the one owner
// of every default and rule, and is this same type (an alias), so the
// settings you set in code are the ones the consumer reads.
type Config = config.Config

// Backoff is one priority's retry wait (Config.RetryBackoff).
type Backoff = config.Backoff

// FieldError is a setting that breaks its rule (Config.Validate): it
// names the field and the variable that sets it.
type FieldError = config.FieldError

// Off, in a Config field whose zero means "default", means none: no
// reserved slots (ReservedHigh), no depth limit (MaxDepth, MaxDepthHigh),
// no fan-out (FanOutMax).
const Off = config.Off

// ConfigFromEnv decodes the TRIAGE_* variables through getenv (os.Getenv
// when nil) into a Config and does nothing else: unset variables leave
// their fields zero, for WithDefaults. A value that does not parse is an
// error naming its variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	return config.Decode(getenv)
}
