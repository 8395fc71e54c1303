package dispatch

import (
	"sync"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/workers"
)

// keyUse counts this consumer's running tasks per fairness key and per
// (type, key), for its heartbeats (the worker registry, and from it the
// keys section of /stats). In memory only: counting costs no request, and
// the maps hold at most one entry per running task.
type keyUse struct {
	mu       sync.Mutex
	keys     map[string]int
	typeKeys map[string]int
	// started and finished count each key's attempts begun and ended
	// since the last heartbeat's report.
	started, finished map[string]int
}

func newKeyUse() *keyUse {
	return &keyUse{keys: map[string]int{}, typeKeys: map[string]int{}, started: map[string]int{}, finished: map[string]int{}}
}

// start counts t running and returns the call that counts it done.
func (u *keyUse) start(t *task.Task) (done func()) {
	k, tk := t.FairKey(), t.Type+"#"+t.FairKey()
	u.mu.Lock()
	u.keys[k]++
	u.typeKeys[tk]++
	u.started[k]++
	u.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.finished[k]++
			if u.keys[k]--; u.keys[k] <= 0 {
				delete(u.keys, k)
			}
			if u.typeKeys[tk]--; u.typeKeys[tk] <= 0 {
				delete(u.typeKeys, tk)
			}
		})
	}
}

// running is what a heartbeat reports, bounded (workers.TopRunning): the
// tasks running now, and those started and finished since the last report.
func (u *keyUse) running() workers.Running {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := workers.TopRunning(u.keys, u.typeKeys)
	r.Started, r.Finished = workers.TopCounts(u.started), workers.TopCounts(u.finished)
	u.started, u.finished = map[string]int{}, map[string]int{}
	return r
}
